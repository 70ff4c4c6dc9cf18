// Lab 4: your analysis of a TorchScript model, in C++. Write your code where it says
// YOUR CODE HERE (delete the `throw` line). scaffold.h describes what you are given: the model
// (torch::jit::Module) and a recorded run of it (ModuleCall, NodeRun). The notebook rebuilds
// the analyzer and runs it; only this file needs to change.
#include <stdexcept>

#include "scaffold.h"

namespace course {

// Task 4.1: Weight memory (C++)
//
// Every parameter tensor of the model, submodules included: model.named_parameters() walks them
// (recurse=true is its default). A parameter's bytes are numel() * element_size(), in its own dtype.
// Buffers (BatchNorm's running statistics) are not weights: model.named_buffers() would list them.
WeightReport weight_memory(const torch::jit::Module& model) {
  WeightReport report;
  for (const auto& param : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& tensor = param.value;
    report.tensors += 1;
    report.parameters += tensor.numel();
    report.bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
  }
  return report;
}

// Task 4.2: Activation memory (C++)
//
// What we count: the output tensor of every call of a LEAF module (a module without child modules:
// Conv2d, BatchNorm2d, ReLU, MaxPool2d, Linear, ...), once per call, as numel() * element_size().
// Containers (Sequential, BasicConv2d, Inception, the model itself) are not counted: their output
// is one of their leaves' outputs or made by an operator between leaves (torch.cat, flatten, +).
// The model's input is not counted either. This is the memory all leaf outputs would take if every
// one were kept, as training keeps them for the backward pass; Python's forward hooks on the leaf
// modules give the same figure. Leaves sit at any depth: walk the call tree recursively.

// Appends a pointer to every leaf call under `call` (itself included), depth first, in call order.
void collect_leaves(const ModuleCall& call, std::vector<const ModuleCall*>& leaves) {
  if (call.leaf) {
    leaves.push_back(&call);
    return;
  }
  for (const ModuleCall& child : call.children) collect_leaves(child, leaves);
}

ActivationReport activation_memory(const ModuleCall& root) {
  ActivationReport report;
  std::vector<const ModuleCall*> leaves;
  collect_leaves(root, leaves);
  for (const ModuleCall* call : leaves) {
    const at::Tensor& out = call->output.toTensor();
    const int64_t element_size = static_cast<int64_t>(out.element_size());
    report.layers.push_back({call->name, call->type, out.sizes().vec(), element_size, out.numel() * element_size});
    report.total_bytes += out.numel() * element_size;
  }
  return report;
}

// Task 4.3: MACs (C++)
//
// The course convention (lab 1): a convolution costs (output elements) x (C_in / groups) x (kernel
// elements) MACs, a linear layer (output elements) x in_features; everything else costs 0. In the
// graph, convolutions are aten::_convolution (traced) or aten::conv2d (scripted) nodes with inputs
// "input", "weight" (C_out x C_in/groups x kH x kW), "groups"; linear layers are aten::linear
// ("input", "weight": out_features x in_features) or aten::addmm ("self" = bias, "mat1" = input
// rows, "mat2" = in_features x out_features). node.arg("weight").toTensor().sizes() gives a shape.

// MACs of one node under the convention (0 for every other kind of node).
int64_t node_macs(const NodeRun& node) {
  if (node.kind == "aten::_convolution" || node.kind == "aten::conv2d") {
    const at::Tensor& weight = node.arg("weight").toTensor();  // one filter is C_in/groups x kH x kW
    return node.output().toTensor().numel() * (weight.numel() / weight.size(0));
  }
  if (node.kind == "aten::linear") {
    return node.output().toTensor().numel() * node.arg("weight").toTensor().size(1);
  }
  if (node.kind == "aten::addmm") {
    return node.output().toTensor().numel() * node.arg("mat1").toTensor().size(1);
  }
  return 0;
}

// Adds the MACs of every node that ran under `call` (its own nodes first, then each child call's,
// depth first) to `report`. Containers count too: a functional torch.addmm in a model's forward is
// a node of the container's call, not of a leaf.
void add_macs(const ModuleCall& call, MacReport& report) {
  for (const NodeRun& node : call.nodes) {
    const int64_t macs = node_macs(node);
    if (macs == 0) continue;
    report.nodes.push_back({node.module, node.kind, macs});
    report.by_kind[node.kind] += macs;
    report.total += macs;
  }
  for (const ModuleCall& child : call.children) add_macs(child, report);
}

MacReport count_macs(const ModuleCall& root) {
  MacReport report;
  add_macs(root, report);
  return report;
}

}  // namespace course
