#include "train/zero1.h"

#include <algorithm>

#include "autograd/variable.h"
#include "ops/adamw.h"
#include "ops/elementwise.h"

namespace ft {

Zero1::Zero1(ParamArena& arena, const AdamWConfig& cfg, Communicator& comm, DType wire)
    : arena_(arena), cfg_(cfg), comm_(comm) {
  const int64_t W = comm.world_size();
  n_ = arena.numel() / (16 * W) * 16;
  FT_CHECK_ARG(n_ > 0, "[zero1] the arena (", arena.numel(), " elements) is too small to shard over ", W, " ranks");
  FT_CHECK_ARG(wire == DType::F32 || wire == DType::BF16, "[zero1] the gradient wire dtype is f32 or bf16, got ", wire);
  const int64_t state = n_ + tail_numel();
  m_ = Tensor::zeros({state}, DType::F32, arena.device());
  v_ = Tensor::zeros({state}, DType::F32, arena.device());
  if (wire == DType::BF16) wire_ = Tensor::zeros({W * n_}, DType::BF16, arena.device());
}

std::vector<Zero1::Range> Zero1::update_ranges() const {
  const int64_t r = comm_.rank(), W = comm_.world_size();
  std::vector<Range> out{{r * n_, (r + 1) * n_, 0}};
  if (tail_numel() > 0) out.push_back({W * n_, arena_.numel(), n_});
  return out;
}

void Zero1::reduce_gradients() {
  autograd::NoGradGuard no_grad;
  const int64_t r = comm_.rank(), W = comm_.world_size();
  const Tensor& g = arena_.grads();
  const Tensor sharded = wire_.defined() ? wire_ : g.slice(0, 0, W * n_);
  if (wire_.defined()) ops::cast_into(wire_, g.slice(0, 0, W * n_));  // on the compute stream
  comm_.comm_waits_for_compute();
  comm_.reduce_scatter_sum(sharded, sharded.slice(0, r * n_, (r + 1) * n_));
  if (tail_numel() > 0) comm_.all_reduce_sum_(g.slice(0, W * n_, arena_.numel()));
  comm_.compute_waits_for_comm();
  if (wire_.defined()) ops::cast_into(g.slice(0, r * n_, (r + 1) * n_), wire_.slice(0, r * n_, (r + 1) * n_));
}

ops::GradNorm Zero1::grad_norm() {
  const int64_t r = comm_.rank(), W = comm_.world_size();
  const Tensor& g = arena_.grads();
  std::vector<Tensor> mine{g.slice(0, r * n_, (r + 1) * n_)};
  if (r == W - 1 && tail_numel() > 0) mine.push_back(g.slice(0, W * n_, arena_.numel()));  // counted once
  const Tensor local = ops::grad_norm(mine).norm;  // (1)
  const Tensor norms = Tensor::empty({W}, DType::F32, arena_.device());
  comm_.comm_waits_for_compute();
  comm_.all_gather(local, norms);
  comm_.compute_waits_for_comm();
  // sqrt(sum_r norm_r^2): the norm of the vector of norms. inf/NaN anywhere stays inf/NaN.
  return ops::grad_norm(norms);
}

void Zero1::step(double lr, int64_t step, double grad_scale, const Tensor& grad_norm) {
  autograd::NoGradGuard no_grad;
  ops::AdamWOptions o = adamw_options(cfg_, lr, step, grad_scale, grad_norm);
  const Tensor& working = arena_.working();
  for (const Range& rg : update_ranges()) {
    for (const bool decay : {true, false}) {
      const ParamArena::Region reg = decay ? arena_.decay_region() : arena_.no_decay_region();
      const int64_t b = std::max(rg.begin, reg.begin), e = std::min(rg.end, reg.end);
      if (b >= e) continue;
      o.weight_decay = decay ? static_cast<float>(cfg_.weight_decay) : 0.f;
      const int64_t sb = rg.state_offset + (b - rg.begin), se = sb + (e - b);
      ops::adamw_step(arena_.master().slice(0, b, e), arena_.grads().slice(0, b, e), m_.slice(0, sb, se),
                      v_.slice(0, sb, se), o, working.defined() ? working.slice(0, b, e) : Tensor());
    }
  }
  // Padding between the regions' tensors is zero in master, grads, m and v, so an update of a
  // range that spans padding leaves it zero (param_arena.h).
  if (!working.defined()) {
    master_partial_ = true;  // fp32 compute: the model reads master itself, gathered right away
    gather_master();
    return;
  }
  // The working copy's owned slice (and tail) was written by adamw_step: gather the rest.
  const int64_t r = comm_.rank(), W = comm_.world_size();
  comm_.comm_waits_for_compute();
  comm_.all_gather(working.slice(0, r * n_, (r + 1) * n_), working.slice(0, 0, W * n_));
  comm_.compute_waits_for_comm();
  master_partial_ = true;
}

void Zero1::gather_master() {
  if (!master_partial_) return;
  const int64_t r = comm_.rank(), W = comm_.world_size();
  comm_.comm_waits_for_compute();
  comm_.all_gather(arena_.master().slice(0, r * n_, (r + 1) * n_), arena_.master().slice(0, 0, W * n_));
  comm_.compute_waits_for_comm();
  master_partial_ = false;
}

std::vector<NamedTensor> Zero1::state_tensors() {
  // Gathered chunk by chunk into host tensors, so a checkpoint adds only 2 (W + 1) chunks of device
  // memory, not two full (N) tensors: a ZeRO-1 run's peak stays that of its training steps.
  constexpr int64_t kChunk = int64_t{1} << 22;  // elements per rank and round (16 MiB)
  const int64_t W = comm_.world_size(), N = arena_.numel();
  // At most a quarter shard per round, so the (W + 1) chunks stay below the m and v memory saved.
  const int64_t c = std::min(kChunk, std::max<int64_t>(16, n_ / 4));
  const Tensor in = Tensor::empty({c}, DType::F32, arena_.device());
  const Tensor gathered = Tensor::empty({W * c}, DType::F32, arena_.device());
  std::vector<NamedTensor> out;
  for (const auto& [name, state] : {std::pair<const char*, const Tensor*>{"adamw.m", &m_}, {"adamw.v", &v_}}) {
    Tensor full = Tensor::zeros({N}, DType::F32, Device::cpu());
    for (int64_t at = 0; at < n_; at += c) {
      const int64_t len = std::min(c, n_ - at);  // the same on every rank
      in.slice(0, 0, len).copy_(state->slice(0, at, at + len));
      comm_.comm_waits_for_compute();
      comm_.all_gather(in.slice(0, 0, len), gathered.slice(0, 0, W * len));
      comm_.compute_waits_for_comm();
      const Tensor host = gathered.slice(0, 0, W * len).to(Device::cpu());
      for (int64_t q = 0; q < W; ++q)
        full.slice(0, q * n_ + at, q * n_ + at + len).copy_(host.slice(0, q * len, (q + 1) * len));
    }
    if (tail_numel() > 0) full.slice(0, W * n_, N).copy_(state->slice(0, n_, n_ + tail_numel()).to(Device::cpu()));
    out.push_back({name, full});
  }
  return out;
}

void Zero1::load_state(const std::vector<NamedTensor>& tensors) {
  int found = 0;
  const int64_t N = arena_.numel();
  for (const NamedTensor& t : tensors) {
    Tensor* dst = t.name == "adamw.m" ? &m_ : t.name == "adamw.v" ? &v_ : nullptr;
    if (!dst) continue;
    FT_CHECK_ARG(t.tensor.numel() == N && t.tensor.dtype() == DType::F32, "[zero1] checkpoint tensor '", t.name,
                 "' is ", t.tensor.dtype(), " ", t.tensor.shape(), ", the arena needs f32 (", N, ")");
    const Tensor flat = t.tensor.reshape({N});
    for (const Range& rg : update_ranges())
      dst->slice(0, rg.state_offset, rg.state_offset + (rg.end - rg.begin)).copy_(flat.slice(0, rg.begin, rg.end));
    ++found;
  }
  FT_CHECK_ARG(found == 2, "[zero1] the optimizer state needs adamw.m and adamw.v, found ", found, " of them");
}

}  // namespace ft
