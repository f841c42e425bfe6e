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

}  // namespace ft::autograd
