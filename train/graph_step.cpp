#include "train/graph_step.h"

#include <cstring>
#include <ostream>
#include <vector>

#include "autograd/variable.h"
#include "core/allocator.h"
#include "core/cuda/graph.h"
#include "ops/elementwise.h"

namespace ft {

CapturedMicroStep::CapturedMicroStep(nn::GPT& model, Device device, std::ostream* log)
    : model_(model), device_(device), log_(log) {
  FT_CHECK_ARG(device.is_cuda(), "[compile_model] CUDA-graph capture needs a CUDA device, got ", device);
  loss_sum_ = Tensor::zeros({1}, DType::F32, device_);
  philox_base_ = Tensor::zeros({1}, DType::I64, device_);
}

CapturedMicroStep::~CapturedMicroStep() = default;

void CapturedMicroStep::begin_step() { loss_sum_.zero_(); }

bool CapturedMicroStep::captured() const { return graph_ && graph_->captured(); }

int64_t CapturedMicroStep::num_kernels() const { return captured() ? graph_->num_kernels() : 0; }

void CapturedMicroStep::load_batch(const Batch& batch) {
  if (batch.B != B_ || batch.T != T_) {
    graph_.reset();  // a new shape: the old graph (and its pool) is of no use
    B_ = batch.B;
    T_ = batch.T;
    windows_ = Tensor::empty({B_, T_ + 1}, DType::I32, device_);  // outside any pool
  }
  // Pageable source: the copy is staged before copy_ returns, so `host` may go at once.
  Tensor host = Tensor::empty({B_, T_ + 1}, DType::I32);
  std::memcpy(host.data_ptr(), batch.tokens, static_cast<size_t>(host.nbytes()));
  windows_.copy_(host);
}

void CapturedMicroStep::body(double eager_seed) {
  const Tensor inputs = windows_.slice(1, 0, T_).contiguous();       // (B, T)
  const Tensor targets = windows_.slice(1, 1, T_ + 1).contiguous();  // (B, T)
  const nn::GPTOutput out = model_.forward(inputs, targets, B_ * T_);
  {
    autograd::NoGradGuard no_grad;
    ops::add_(loss_sum_, ops::cast(out.loss.detach(), DType::F32).reshape({1}));
  }
  if (!seed_.defined() || seed_.shape() != out.loss.shape() || seed_.dtype() != out.loss.dtype())
    seed_ = Tensor::empty(out.loss.shape(), out.loss.dtype(), device_);
  if (eager_seed >= 0) seed_.fill_(eager_seed);
  autograd::backward(out.loss, seed_);
}

void CapturedMicroStep::capture() {
  // The warm-up's activations sit in the general cache; the graph gets its own copy of them.
  allocator_for(device_).empty_cache();
  if (!graph_) graph_ = std::make_unique<cuda::Graph>(device_.index);
  Generator& gen = model_.generator();
  gen.begin_capture(reinterpret_cast<const uint64_t*>(philox_base_.data_ptr()));
  try {
    graph_->capture([&] { body(-1.0); });
  } catch (...) {
    gen.end_capture();
    throw;
  }
  philox_per_step_ = gen.end_capture();
  if (log_)
    *log_ << "flashtrain: compile_model: micro-step captured in a CUDA graph (" << graph_->num_kernels()
          << " kernels, " << graph_->num_nodes() << " nodes; B = " << B_ << ", T = " << T_ << ")\n"
          << std::flush;
}

void CapturedMicroStep::run(const Batch& batch, double loss_scale) {
  FT_CHECK_ARG(loss_scale > 0, "[compile_model] loss scale must be positive, got ", loss_scale);
  FT_CHECK_ARG(model_.is_training(), "[compile_model] the model must be in training mode");
  load_batch(batch);
  if (!warmed_up_) {
    body(loss_scale);
    warmed_up_ = true;
    return;
  }
  if (!captured()) capture();
  Generator& gen = model_.generator();
  const std::vector<int64_t> base = {static_cast<int64_t>(gen.state().offset)};
  philox_base_.copy_(Tensor::from_vector(base, {1}));
  gen.advance(philox_per_step_);
  seed_.fill_(loss_scale);
  graph_->replay();
  ++replays_;
}

}  // namespace ft
