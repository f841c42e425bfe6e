// What a differentiable op does after computing its forward with ops::
//
//   Tensor y = ops::gelu_forward(x);
//   if (needs_graph({x})) {
//     auto node = std::make_shared<GeluBackward>();
//     node->x = x.detach();                 // save what backward needs (never the output's graph)
//     record(node, {x}, {y});
//   }
//   return y;
//
// record() links the node to the inputs' producers and marks the outputs as its results.
#pragma once

#include <memory>
#include <vector>

#include "autograd/node.h"
#include "autograd/variable.h"

namespace ft::autograd {

// True when grad mode is on and some input requires a gradient.
bool needs_graph(const std::vector<Tensor>& inputs);

// Connects `node` between `inputs` and `outputs` (outputs become non-leaves requiring grad).
void record(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs);

// In-place gradients for leaves. When input i of `node` is a leaf whose .grad is already set
// with shape `shape` and dtype f32 (the trainer presets every parameter's gradient as a view into
// its fp32 arena), returns that .grad, else an undefined tensor. A backward that gets it may add
// its gradient there itself -- a weight gradient as one product with beta = 1 into fp32
// (ops::matmul_out), instead of a bf16 product that AccumulateGrad widens and adds: two passes
// over every weight gradient fewer -- and then returns an undefined gradient for input i and
// calls mark_delivered(node, i), so the leaf's on_grad_ready hook still fires once all its
// consumers are done. Adding in place is what AccumulateGrad does anyway (+=), so accumulation
// over micro-batches and tied weights (several consumers of one leaf) keep their meaning.
Tensor direct_grad(const Node& node, size_t i, const Shape& shape);
void mark_delivered(const Node& node, size_t i);

}  // namespace ft::autograd
