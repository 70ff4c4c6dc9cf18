// Lab 4 scaffold: the graph walk, the command line and the JSON output (given code; read it).
//
//   analyzer MODEL.pt N,C,H,W
//
// loads a traced TorchScript model, records one run on a zero input of that shape (record_calls),
// calls your three analyses and prints ONE line of JSON on stdout:
//   {"input_shape": [...], "results": {"weights": ..., "activations": ..., "macs": ...},
//    "errors": {"macs": "Implement task 4.3: MACs"}}
// An analysis that throws is reported under "errors" and the others still run. Print your own
// debugging output to std::cerr: stdout is for the JSON.
#include "scaffold.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/serialization/import.h>

#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace course {

using torch::jit::Node;
using torch::jit::Value;

const c10::IValue& NodeRun::arg(const std::string& name) const {
  for (size_t i = 0; i < input_names.size(); ++i) {
    if (input_names[i] == name) return inputs.at(i);
  }
  std::string known;
  for (const auto& n : input_names) known += (known.empty() ? "" : ", ") + n;
  throw std::out_of_range(kind + " has no input called '" + name + "'; its inputs are: " + known);
}

namespace {

// Runs one method graph node by node, so that every intermediate value can be recorded.
// prim::CallMethod on a submodule recurses into that module's own graph (a new ModuleCall);
// every other node with a schema runs through its registered operator.
class Recorder {
 public:
  c10::IValue run(const torch::jit::Module& module, const std::string& method,
                  std::vector<c10::IValue> args, ModuleCall& call) {
    auto& graph = *torch::jit::toGraphFunction(module.get_method(method).function()).graph();
    std::unordered_map<const Value*, c10::IValue> env;
    for (size_t i = 0; i < graph.inputs().size(); ++i) env[graph.inputs()[i]] = args.at(i);
    for (Node* node : graph.nodes()) step(node, env, call);
    if (graph.outputs().size() != 1) throw std::runtime_error("a forward with several outputs is not supported");
    return env.at(graph.outputs()[0]);
  }

 private:
  void step(Node* node, std::unordered_map<const Value*, c10::IValue>& env, ModuleCall& call) {
    auto in = [&](size_t i) -> const c10::IValue& { return env.at(node->input(i)); };
    const auto kind = node->kind();
    if (kind == c10::prim::Constant) {
      env[node->output()] = *torch::jit::toIValue(node->output());
    } else if (kind == c10::prim::GetAttr) {
      env[node->output()] = in(0).toObject()->getAttr(node->s(c10::attr::name));
    } else if (kind == c10::prim::ListConstruct) {
      c10::impl::GenericList list(node->output()->type()->expectRef<c10::ListType>().getElementType());
      for (const Value* v : node->inputs()) list.push_back(env.at(v));
      env[node->output()] = c10::IValue(std::move(list));
    } else if (kind == c10::prim::TupleConstruct) {
      std::vector<c10::IValue> items;
      for (const Value* v : node->inputs()) items.push_back(env.at(v));
      env[node->output()] = c10::ivalue::Tuple::create(std::move(items));
    } else if (kind == c10::prim::TupleUnpack || kind == c10::prim::ListUnpack) {
      std::vector<c10::IValue> items = in(0).isTuple() ? in(0).toTupleRef().elements().vec() : in(0).toList().vec();
      for (size_t i = 0; i < node->outputs().size(); ++i) env[node->outputs()[i]] = items.at(i);
    } else if (kind == c10::prim::CallMethod) {
      callMethod(node, env, call);
    } else if (!node->blocks().empty()) {
      throw std::runtime_error(std::string("cannot record ") + kind.toQualString() +
                               ": export the model with torch.jit.trace, which leaves no control flow");
    } else {
      runOperator(node, env, call);
    }
  }

  void callMethod(Node* node, std::unordered_map<const Value*, c10::IValue>& env, ModuleCall& call) {
    torch::jit::Module module(env.at(node->input(0)).toObject());
    std::vector<c10::IValue> args;
    for (const Value* v : node->inputs()) args.push_back(env.at(v));
    const Node* owner = node->input(0)->node();
    if (owner->kind() != c10::prim::GetAttr) {  // a method of the same module: no new call
      env[node->output()] = run(module, node->s(c10::attr::name), std::move(args), call);
      return;
    }
    ModuleCall child;
    const std::string attr = owner->s(c10::attr::name);
    child.name = call.name.empty() ? attr : call.name + "." + attr;
    child.type = module.type()->name()->name();
    child.leaf = module.children().size() == 0;
    child.output = run(module, node->s(c10::attr::name), std::move(args), child);
    env[node->output()] = child.output;
    call.children.push_back(std::move(child));
  }

  void runOperator(Node* node, std::unordered_map<const Value*, c10::IValue>& env, ModuleCall& call) {
    NodeRun run;
    run.kind = node->kind().toQualString();
    run.module = call.name;
    const c10::FunctionSchema* schema = node->maybeSchema();
    torch::jit::Stack stack;
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      stack.push_back(env.at(node->input(i)));
      run.input_names.push_back(schema && i < schema->arguments().size() ? schema->arguments()[i].name()
                                                                         : "input" + std::to_string(i));
    }
    run.inputs = stack;
    node->getOperation()(stack);
    const size_t count = node->outputs().size();
    for (size_t i = 0; i < count; ++i) {
      env[node->outputs()[i]] = stack.at(stack.size() - count + i);
      run.outputs.push_back(env[node->outputs()[i]]);
    }
    call.nodes.push_back(std::move(run));
  }
};

// ---- JSON output ------------------------------------------------------------------------------

std::string quote(const std::string& text) {
  std::ostringstream out;
  out << '"';
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') out << '\\' << c;
    else if (c < 0x20) out << "\\u" << std::hex << std::setw(4) << std::setfill('0') << int(c) << std::dec;
    else out << c;
  }
  out << '"';
  return out.str();
}

std::string ints(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

std::string to_json(const WeightReport& r) {
  return "{\"tensors\": " + std::to_string(r.tensors) + ", \"parameters\": " + std::to_string(r.parameters) +
         ", \"bytes\": " + std::to_string(r.bytes) + "}";
}

std::string to_json(const ActivationReport& r) {
  std::string layers;
  for (const auto& l : r.layers) {
    layers += std::string(layers.empty() ? "" : ", ") + "{\"name\": " + quote(l.name) + ", \"type\": " + quote(l.type) +
              ", \"shape\": " + ints(l.shape) + ", \"element_size\": " + std::to_string(l.element_size) +
              ", \"bytes\": " + std::to_string(l.bytes) + "}";
  }
  return "{\"layers\": [" + layers + "], \"total_bytes\": " + std::to_string(r.total_bytes) + "}";
}

std::string to_json(const MacReport& r) {
  std::string nodes, kinds;
  for (const auto& n : r.nodes) {
    nodes += std::string(nodes.empty() ? "" : ", ") + "{\"module\": " + quote(n.module) + ", \"kind\": " +
             quote(n.kind) + ", \"macs\": " + std::to_string(n.macs) + "}";
  }
  for (const auto& [kind, macs] : r.by_kind) {
    kinds += std::string(kinds.empty() ? "" : ", ") + quote(kind) + ": " + std::to_string(macs);
  }
  return "{\"nodes\": [" + nodes + "], \"by_kind\": {" + kinds + "}, \"total\": " + std::to_string(r.total) + "}";
}

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    size_t used = 0;
    int64_t value = std::stoll(part, &used);
    if (used != part.size() || value <= 0) throw std::invalid_argument(part);
    shape.push_back(value);
  }
  if (shape.empty()) throw std::invalid_argument(text);
  return shape;
}

}  // namespace

ModuleCall record_calls(const torch::jit::Module& model, const std::vector<int64_t>& input_shape) {
  at::NoGradGuard no_grad;
  ModuleCall root;
  root.type = model.type()->name()->name();
  root.leaf = model.children().size() == 0;
  root.output = Recorder().run(model, "forward", {model._ivalue(), at::zeros(input_shape)}, root);
  return root;
}

}  // namespace course

int main(int argc, char** argv) {
  using namespace course;
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " MODEL.pt N,C,H,W   (a traced TorchScript model and its input shape)\n";
    return 2;
  }
  std::vector<int64_t> shape;
  try {
    shape = parse_shape(argv[2]);
  } catch (const std::exception&) {
    std::cerr << "error: the input shape must be positive integers separated by commas, e.g. 1,3,224,224; got "
              << argv[2] << "\n";
    return 2;
  }
  at::set_num_threads(1);
  torch::jit::Module model;
  ModuleCall root;
  try {
    model = torch::jit::load(argv[1]);
    model.eval();
    root = record_calls(model, shape);
  } catch (const std::exception& e) {
    std::cerr << "error: could not load and run " << argv[1] << ": " << e.what() << "\n";
    return 3;
  }
  std::vector<std::pair<std::string, std::function<std::string()>>> parts = {
      {"weights", [&] { return to_json(weight_memory(model)); }},
      {"activations", [&] { return to_json(activation_memory(root)); }},
      {"macs", [&] { return to_json(count_macs(root)); }},
  };
  std::string results, errors;
  for (const auto& [part, analyse] : parts) {
    try {
      results += std::string(results.empty() ? "" : ", ") + quote(part) + ": " + analyse();
    } catch (const std::exception& e) {
      errors += std::string(errors.empty() ? "" : ", ") + quote(part) + ": " + quote(e.what());
    }
  }
  std::cout << "{\"input_shape\": " << ints(shape) << ", \"results\": {" << results << "}, \"errors\": {" << errors
            << "}}" << std::endl;
  return 0;
}
