// Lab 4 scaffold: what the analyzer gives you (read it; do not change it).
//
// record_calls() runs a traced TorchScript model once and records what happened as a tree:
// one ModuleCall per module call (the whole model is the root), and inside each call the
// operator nodes (aten::...) that ran directly in that module's forward, with their runtime
// input and output values. You write the analysis in analysis.cpp on top of it: no parsing of
// IR dumps, no shape inference by hand, every tensor's shape is the one it really had.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/api/module.h>

namespace course {

// One operator node that ran, e.g. aten::_convolution, with the values it saw.
struct NodeRun {
  std::string kind;                      // qualified operator name: "aten::_convolution", "aten::linear", ...
  std::string module;                    // dotted name of the module whose forward holds the node ("" = the model)
  std::vector<std::string> input_names;  // argument names from the operator's schema: "input", "weight", ...
  std::vector<c10::IValue> inputs;       // runtime values of the inputs, in schema order
  std::vector<c10::IValue> outputs;      // runtime values of the outputs

  // The input called `name` in the operator's schema, e.g. arg("weight").toTensor() or
  // arg("groups").toInt(). Throws std::out_of_range listing the names this node has.
  const c10::IValue& arg(const std::string& name) const;
  // The first output (every operator this lab counts has exactly one).
  const c10::IValue& output() const { return outputs.at(0); }
};

// One call of a module: the root is the whole model, its children the calls made inside it.
struct ModuleCall {
  std::string name;                 // dotted name as in model.named_modules(): "inception3a.branch2.0.conv"
  std::string type;                 // class name: "Conv2d", "BasicConv2d", "GoogLeNet"
  bool leaf = false;                // true when the module has no child modules (Conv2d, ReLU, Linear, ...)
  c10::IValue output;               // what the call returned (a Tensor for every module in this lab)
  std::vector<ModuleCall> children; // module calls made directly inside this one, in call order
  std::vector<NodeRun> nodes;       // operator nodes that ran directly in this module's forward, in order
};

// Run `model` once on a zero input of `input_shape` and record every module call and operator node.
// A module called twice appears twice. Works for traced models (torch.jit.trace), which have no
// control flow; a scripted model with if/loop nodes makes it throw std::runtime_error.
ModuleCall record_calls(const torch::jit::Module& model, const std::vector<int64_t>& input_shape);

// ---- what you write in analysis.cpp -------------------------------------------------------------

// For task 4.1: every parameter tensor of the model (submodules included), counted once.
struct WeightReport {
  int64_t tensors = 0;     // number of parameter tensors
  int64_t parameters = 0;  // number of elements, summed over those tensors
  int64_t bytes = 0;       // elements x element size, summed (each tensor in its own dtype)
};
WeightReport weight_memory(const torch::jit::Module& model);

// For task 4.2: the output of every leaf-module call.
struct LayerActivation {
  std::string name;            // ModuleCall::name of the leaf call
  std::string type;            // ModuleCall::type
  std::vector<int64_t> shape;  // output shape
  int64_t element_size = 0;    // bytes per element of the output's dtype
  int64_t bytes = 0;           // elements x element_size
};
struct ActivationReport {
  std::vector<LayerActivation> layers;  // one per leaf call, in call order
  int64_t total_bytes = 0;              // sum of the layers' bytes
};
ActivationReport activation_memory(const ModuleCall& root);

// For task 4.3: MACs of the convolution and linear nodes.
struct NodeMacs {
  std::string module;  // NodeRun::module
  std::string kind;    // NodeRun::kind
  int64_t macs = 0;
};
struct MacReport {
  std::vector<NodeMacs> nodes;            // one per node with MACs > 0: a call's own nodes, then its children's
  std::map<std::string, int64_t> by_kind; // node kind -> MACs, only kinds that were counted
  int64_t total = 0;
};
int64_t node_macs(const NodeRun& node);
MacReport count_macs(const ModuleCall& root);

}  // namespace course
