// The base of every layer: named parameters (recursively, "h.0.attn.c_attn.weight"), buffers
// that follow the module across devices, and the train/eval flag.
//
// A module stores pointers to its own Tensor members, so modules are neither copied nor moved
// (children are members or held by unique_ptr). Because the registry points at the member itself,
// a trainer can replace every parameter -- for instance with a view into one flat parameter arena:
//
//   model.for_each_parameter([&](const std::string& name, Tensor& p) {
//     Tensor slot = arena_view(name, p.shape());   // same shape and dtype
//     slot.copy_(p);
//     p = slot;                                    // the module now computes with the view
//     autograd::set_requires_grad(p);              // requires_grad lives on the handle's impl
//   });
//
// Parameters are registered with requires_grad set; anything that replaces one must set it again.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ft::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter of this module and its children, depth first in registration order, with its
  // dotted name. fn may replace the tensor (same shape); see the header comment.
  void for_each_parameter(const std::function<void(const std::string&, Tensor&)>& fn);
  void for_each_parameter(const std::function<void(const std::string&, const Tensor&)>& fn) const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;  // handles, not copies
  int64_t num_parameters() const;

  // Moves parameters and buffers (requires_grad is kept on the moved parameters).
  void to(Device device);
  // Casts the floating parameters and buffers, e.g. to f64 for a gradient check. Parameters
  // registered to stay fp32 become f32 instead when dtype is bf16 or f16.
  void to(DType dtype);
  // The dotted names of the parameters that stay fp32 under a bf16 / f16 model (register_parameter).
  std::vector<std::string> fp32_parameter_names() const;

  // Training mode turns dropout on; eval mode off. Recursive.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

 protected:
  // Registers `slot` (a member of the derived class) under `name`, sets it to `value` and marks it
  // as requiring a gradient. stays_fp32: the parameter computes in fp32 even when the model is cast
  // to bf16 / f16 (to(DType), train/param_arena.h), for ops that take fp32 parameters under half
  // activations (LayerNorm's).
  void register_parameter(const std::string& name, Tensor& slot, Tensor value, bool stays_fp32 = false);
  // State that is not trained but moves with the module (e.g. position ids).
  void register_buffer(const std::string& name, Tensor& slot, Tensor value);
  void register_module(const std::string& name, Module& child);

 private:
  void for_each_parameter_prefixed(const std::string& prefix,
                                   const std::function<void(const std::string&, Tensor&)>& fn);
  void for_each_tensor(const std::function<void(Tensor&, bool is_parameter, bool stays_fp32)>& fn);

  std::vector<std::pair<std::string, Tensor*>> parameters_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::vector<std::pair<std::string, Module*>> children_;
  std::vector<std::string> fp32_parameters_;  // this module's own names, registered to stay fp32
  bool training_ = true;
};

}  // namespace ft::nn
