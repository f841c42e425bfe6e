#include "nn/module.h"

#include <algorithm>

#include "autograd/functions/elementwise.h"
#include "autograd/variable.h"

namespace ft::nn {

void Module::register_parameter(const std::string& name, Tensor& slot, Tensor value, bool stays_fp32) {
  FT_CHECK_ARG(value.defined() && is_floating(value.dtype()), "[module] parameter '", name,
               "' must be a defined floating tensor");
  for (const auto& p : parameters_)
    FT_CHECK_ARG(p.first != name, "[module] parameter '", name, "' registered twice");
  slot = std::move(value);
  autograd::set_requires_grad(slot);
  parameters_.emplace_back(name, &slot);
  if (stays_fp32) fp32_parameters_.push_back(name);
}

void Module::register_buffer(const std::string& name, Tensor& slot, Tensor value) {
  slot = std::move(value);
  buffers_.emplace_back(name, &slot);
}

void Module::register_module(const std::string& name, Module& child) {
  for (const auto& c : children_) FT_CHECK_ARG(c.first != name, "[module] child '", name, "' registered twice");
  children_.emplace_back(name, &child);
}

void Module::for_each_parameter_prefixed(const std::string& prefix,
                                         const std::function<void(const std::string&, Tensor&)>& fn) {
  for (auto& [name, slot] : parameters_) fn(prefix + name, *slot);
  for (auto& [name, child] : children_) child->for_each_parameter_prefixed(prefix + name + ".", fn);
}

void Module::for_each_parameter(const std::function<void(const std::string&, Tensor&)>& fn) {
  for_each_parameter_prefixed("", fn);
}

void Module::for_each_parameter(const std::function<void(const std::string&, const Tensor&)>& fn) const {
  // The registry is walked read-only; const_cast only to share the traversal.
  const_cast<Module*>(this)->for_each_parameter_prefixed(
      "", [&](const std::string& name, Tensor& t) { fn(name, t); });
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for_each_parameter([&](const std::string& name, const Tensor& t) { out.emplace_back(name, t); });
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for_each_parameter([&](const std::string&, const Tensor& t) { n += t.numel(); });
  return n;
}

void Module::for_each_tensor(const std::function<void(Tensor&, bool, bool)>& fn) {
  for (auto& p : parameters_) {
    const bool fp32 = std::find(fp32_parameters_.begin(), fp32_parameters_.end(), p.first) != fp32_parameters_.end();
    fn(*p.second, true, fp32);
  }
  for (auto& b : buffers_) fn(*b.second, false, false);
  for (auto& c : children_) c.second->for_each_tensor(fn);
}

std::vector<std::string> Module::fp32_parameter_names() const {
  std::vector<std::string> out;
  for (const std::string& name : fp32_parameters_) out.push_back(name);
  for (const auto& [name, child] : children_)
    for (const std::string& n : child->fp32_parameter_names()) out.push_back(name + "." + n);
  return out;
}

void Module::to(Device device) {
  for_each_tensor([&](Tensor& t, bool is_parameter, bool) {
    if (!t.defined() || t.device() == device) return;
    t = t.detach().to(device);
    if (is_parameter) autograd::set_requires_grad(t);
  });
}

void Module::to(DType dtype) {
  autograd::NoGradGuard no_grad;  // a cast of the weights, not an op of the model
  for_each_tensor([&](Tensor& t, bool is_parameter, bool stays_fp32) {
    const DType to = stays_fp32 && is_half(dtype) ? DType::F32 : dtype;
    if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == to) return;
    t = autograd::cast(t.detach(), to);
    if (is_parameter) autograd::set_requires_grad(t);
  });
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

}  // namespace ft::nn
