#include "train/graph_step.h"

#include <ostream>

#include "autograd/variable.h"
#include "core/allocator.h"
#include "core/cuda/allocator_pool.h"
#include "core/cuda/graph.h"
#include "ops/elementwise.h"

namespace ft {

CapturedMicroStep::CapturedMicroStep(nn::GPT& model, Device device, std::ostream* log)
    : model_(model), device_(device), log_(log) {
  FT_CHECK_ARG(device.is_cuda(), "[compile_model] CUDA-graph capture needs a CUDA device, got ", device);
  loss_sum_ = Tensor::zeros({1}, DType::F32, device_);
  philox_base_ = Tensor::zeros({1}, DType::I64, device_);
}

CapturedMicroStep::~CapturedMicroStep() { drop_graphs(); }

void CapturedMicroStep::drop_graphs() {
  for (Variant& v : variants_) v.graph.reset();  // the graphs first: the pool outlives them
  if (pool_) cuda::release_pool(device_.index, pool_);
  pool_ = 0;
  philox_per_step_ = 0;  // a batch of another shape draws another number of offsets
}

void CapturedMicroStep::set_reduction(MicroStepReduction reduction) {
  FT_CHECK_ARG(!variants_[kPlain].warmed_up && !variants_[kReducing].warmed_up,
               "[compile_model] set_reduction after the first micro-step");
  FT_CHECK_ARG(reduction.before_backward && reduction.after_backward,
               "[compile_model] a reduction needs before_backward and after_backward");
  reduction_ = std::move(reduction);
}

void CapturedMicroStep::begin_step() { loss_sum_.zero_(); }

bool CapturedMicroStep::captured() const {
  for (const Variant& v : variants_)
    if (v.graph && v.graph->captured()) return true;
  return false;
}

int64_t CapturedMicroStep::num_kernels() const { return captured() ? last_kernels_ : 0; }

void CapturedMicroStep::load_batch(const Batch& batch) {
  if (batch.B != B_ || batch.T != T_) {
    drop_graphs();  // a new shape: the old graphs (and their pool) are of no use
    B_ = batch.B;
    T_ = batch.T;
    windows_ = Tensor::empty({B_, T_ + 1}, DType::I32, device_);  // outside any pool
  }
  batch_upload_.upload(windows_, batch.tokens);  // (B, T+1) int32, as the batch holds them
}

void CapturedMicroStep::body(double eager_seed, bool reduce) {
  const Tensor inputs = windows_.slice(1, 0, T_).contiguous();       // (B, T)
  const Tensor targets = windows_.slice(1, 1, T_ + 1).contiguous();  // (B, T)
  // The seed (the loss is an f32 scalar) is made by the first, eager run, outside any graph pool.
  // It is also the head's grad_scale_hint, read from device memory by the forward's loss kernel
  // and the backward's products: a replay uses the scale run() stored there, like the eager step.
  if (!seed_.defined()) seed_ = Tensor::empty({}, DType::F32, device_);
  if (eager_seed >= 0) seed_.fill_(eager_seed);
  const nn::GPTOutput out = model_.forward(inputs, targets, B_ * T_, seed_);
  FT_ASSERT(out.loss.shape() == seed_.shape() && out.loss.dtype() == seed_.dtype(), "[compile_model] the loss is ",
            out.loss.shape(), " ", out.loss.dtype(), ", the seed ", seed_.shape(), " ", seed_.dtype());
  {
    autograd::NoGradGuard no_grad;
    ops::add_(loss_sum_, ops::cast(out.loss.detach(), DType::F32).reshape({1}));
  }
  if (reduce) reduction_.before_backward();
  autograd::backward(out.loss, seed_);
  if (reduce) reduction_.after_backward(loss_sum_);
}

void CapturedMicroStep::capture(Kind kind) {
  // The warm-up's activations sit in the general cache; the graph gets its own copy of them.
  allocator_for(device_).empty_cache();
  if (!pool_) pool_ = cuda::create_pool(device_.index);
  Variant& v = variants_[kind];
  if (!v.graph) v.graph = std::make_unique<cuda::Graph>(device_.index, pool_);
  Generator& gen = model_.generator();
  gen.begin_capture(reinterpret_cast<const uint64_t*>(philox_base_.data_ptr()));
  try {
    v.graph->capture([&] { body(-1.0, kind == kReducing); });
  } catch (...) {
    gen.end_capture();
    throw;
  }
  const uint64_t consumed = gen.end_capture();
  // Both kinds run the same model code; only the collectives differ, and they draw no randomness.
  FT_ASSERT(philox_per_step_ == 0 || consumed == philox_per_step_, "the two micro-step graphs draw ", consumed,
            " and ", philox_per_step_, " Philox offsets");
  philox_per_step_ = consumed;
  last_kernels_ = v.graph->num_kernels();
  if (log_)
    *log_ << "flashtrain: compile_model: " << (kind == kReducing ? "last micro-step (with the gradient all-reduces)"
                                                                 : "micro-step")
          << " captured in a CUDA graph (" << v.graph->num_kernels() << " kernels, " << v.graph->num_nodes()
          << " nodes; B = " << B_ << ", T = " << T_ << ")\n"
          << std::flush;
}

void CapturedMicroStep::run(const Batch& batch, double loss_scale, bool last) {
  FT_CHECK_ARG(loss_scale > 0, "[compile_model] loss scale must be positive, got ", loss_scale);
  FT_CHECK_ARG(model_.is_training(), "[compile_model] the model must be in training mode");
  load_batch(batch);
  const Kind kind = last && reduces() ? kReducing : kPlain;
  Variant& v = variants_[kind];
  if (!v.warmed_up) {
    body(loss_scale, kind == kReducing);
    v.warmed_up = true;
    return;
  }
  if (!v.graph || !v.graph->captured()) capture(kind);
  Generator& gen = model_.generator();
  const int64_t base = static_cast<int64_t>(gen.state().offset);
  philox_upload_.upload(philox_base_, &base);
  gen.advance(philox_per_step_);
  seed_.fill_(loss_scale);
  v.graph->replay();
  if (kind == kReducing && reduction_.after_replay) reduction_.after_replay();
  ++replays_;
}

}  // namespace ft
