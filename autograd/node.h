// The autograd graph: a Node per differentiable op call, edges to the nodes of its inputs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ft::autograd {

struct Node;

// Where the gradient of one input goes: output `input_nr` of `node`'s forward... i.e. the node
// that produced that input (or the leaf accumulator), and which of its outputs it was.
struct Edge {
  std::shared_ptr<Node> node;  // null: the input needs no gradient
  int output_nr = 0;
};

struct Node : std::enable_shared_from_this<Node> {
  virtual ~Node() = default;
  // Gradients of the inputs given the gradients of the outputs (one per output; an undefined
  // tensor means "zero"). Returns one tensor per input, undefined where the input needs none.
  virtual std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) = 0;
  virtual const char* name() const = 0;
  // Drops saved tensors once backward has run, so their memory returns to the allocator.
  virtual void release() {}
  // Whether the engine must run this node even though no gradient tensor reached it: a leaf's
  // accumulator whose gradient a consumer already added in place (autograd::direct_grad).
  virtual bool delivered_in_place() const { return false; }

  std::vector<Edge> next;  // one per forward input
  int num_outputs = 1;
  // Whether each input wanted a gradient (filled in by autograd::record); lets backward skip work.
  std::vector<bool> needs_grad;
};

// The per-tensor autograd state stored in the core Tensor's opaque slot.
struct AutogradMeta : AutogradMetaBase {
  bool requires_grad = false;
  Tensor grad;                       // accumulated gradient of a leaf
  std::shared_ptr<Node> grad_fn;     // producer of a non-leaf
  int output_nr = 0;                 // which output of grad_fn this tensor is
  std::shared_ptr<Node> accumulator; // a leaf's AccumulateGrad node, made once and shared
};

}  // namespace ft::autograd
