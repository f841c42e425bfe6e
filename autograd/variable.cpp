#include "autograd/variable.h"

#include "autograd/accumulate_grad.h"
#include "ops/elementwise.h"

namespace ft::autograd {
namespace {

thread_local bool g_grad_mode = true;

AutogradMeta* meta_of(const Tensor& t) { return static_cast<AutogradMeta*>(t.autograd_meta().get()); }

AutogradMeta& ensure_meta(const Tensor& t) {
  if (!t.autograd_meta()) t.set_autograd_meta(std::make_shared<AutogradMeta>());
  return *meta_of(t);
}

}  // namespace

void set_requires_grad(const Tensor& t, bool value) {
  AutogradMeta& m = ensure_meta(t);
  FT_CHECK_ARG(!m.grad_fn, "[set_requires_grad] only leaves (tensors not produced by a "
                           "differentiable op) can be marked; this one came from ", m.grad_fn->name());
  FT_CHECK_ARG(!value || is_floating(t.dtype()), "[set_requires_grad] gradients need a floating "
                                                 "dtype, tensor is ", t.dtype());
  m.requires_grad = value;
}

bool requires_grad(const Tensor& t) {
  const AutogradMeta* m = t.defined() ? meta_of(t) : nullptr;
  return m && (m->requires_grad || m->grad_fn);
}

Tensor grad(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m ? m->grad : Tensor();
}

void set_grad(const Tensor& t, const Tensor& g) {
  if (g.defined()) {
    FT_CHECK_ARG(g.shape() == t.shape() && g.device() == t.device(), "[set_grad] gradient ", g,
                 " does not match tensor ", t);
  }
  ensure_meta(t).grad = g;
}

void set_grad_ready_hook(const Tensor& t, std::function<void()> hook) {
  AutogradMeta& m = ensure_meta(t);
  FT_CHECK_ARG(!m.grad_fn && m.requires_grad, "[set_grad_ready_hook] only a leaf that requires a gradient has one");
  // The same accumulator autograd::record would make (autograd/function.cpp), made early so the
  // hook is on it; record reuses an existing one.
  if (!m.accumulator) {
    auto acc = std::make_shared<AccumulateGrad>();
    acc->leaf_meta = std::static_pointer_cast<AutogradMeta>(t.autograd_meta());
    acc->shape = t.shape();
    m.accumulator = acc;
  }
  std::static_pointer_cast<AccumulateGrad>(m.accumulator)->on_grad_ready = std::move(hook);
}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m ? m->grad_fn : nullptr;
}

NoGradGuard::NoGradGuard() : prev_(g_grad_mode) { g_grad_mode = false; }
NoGradGuard::~NoGradGuard() { g_grad_mode = prev_; }
bool grad_mode_enabled() { return g_grad_mode; }

}  // namespace ft::autograd
