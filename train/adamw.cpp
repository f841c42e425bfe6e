#include "train/adamw.h"

#include "autograd/variable.h"
#include "ops/adamw.h"

namespace ft {

AdamW::AdamW(ParamArena& arena, const AdamWConfig& cfg) : arena_(arena), cfg_(cfg) {
  m_ = Tensor::zeros({arena.numel()}, DType::F32, arena.device());
  v_ = Tensor::zeros({arena.numel()}, DType::F32, arena.device());
}

ops::AdamWOptions adamw_options(const AdamWConfig& cfg, double lr, int64_t step, double grad_scale,
                                const Tensor& grad_norm) {
  ops::AdamWOptions o;
  o.lr = static_cast<float>(lr);
  o.beta1 = static_cast<float>(cfg.beta1);
  o.beta2 = static_cast<float>(cfg.beta2);
  o.eps = static_cast<float>(cfg.eps);
  o.step = step;
  o.grad_scale = static_cast<float>(grad_scale);
  o.grad_norm = grad_norm;
  o.max_grad_norm = static_cast<float>(cfg.max_grad_norm);
  return o;  // weight_decay is set per region by the caller
}

void AdamW::step(double lr, int64_t step, double grad_scale, const Tensor& grad_norm) {
  autograd::NoGradGuard no_grad;
  ops::AdamWOptions o = adamw_options(cfg_, lr, step, grad_scale, grad_norm);
  for (const bool decay : {true, false}) {
    const ParamArena::Region r = decay ? arena_.decay_region() : arena_.no_decay_region();
    if (r.numel() == 0) continue;
    o.weight_decay = decay ? static_cast<float>(cfg_.weight_decay) : 0.f;
    const Tensor working = arena_.working().defined() ? ParamArena::region_of(arena_.working(), r) : Tensor();
    ops::adamw_step(ParamArena::region_of(arena_.master(), r), ParamArena::region_of(arena_.grads(), r),
                    ParamArena::region_of(m_, r), ParamArena::region_of(v_, r), o, working);
  }
}

std::vector<NamedTensor> AdamW::state_tensors() const { return {{"adamw.m", m_}, {"adamw.v", v_}}; }

void AdamW::load_state(const std::vector<NamedTensor>& tensors) {
  int found = 0;
  for (const NamedTensor& t : tensors) {
    Tensor* dst = t.name == "adamw.m" ? &m_ : t.name == "adamw.v" ? &v_ : nullptr;
    if (!dst) continue;
    FT_CHECK_ARG(t.tensor.numel() == dst->numel() && t.tensor.dtype() == DType::F32, "[adamw] checkpoint tensor '",
                 t.name, "' is ", t.tensor.dtype(), " ", t.tensor.shape(), ", the arena needs f32 (", dst->numel(),
                 ")");
    dst->copy_(t.tensor.reshape({dst->numel()}));
    ++found;
  }
  FT_CHECK_ARG(found == 2, "[adamw] the optimizer state needs adamw.m and adamw.v, found ", found, " of them");
}

}  // namespace ft
