#include "train/grad_sync.h"

#include <algorithm>
#include <string>

#include "autograd/variable.h"
#include "ops/elementwise.h"

namespace ft {

GradSync::GradSync(ParamArena& arena, nn::Module& model, Communicator& comm, double bucket_mb, DType wire)
    : arena_(arena), comm_(comm) {
  FT_CHECK_ARG(bucket_mb > 0, "[grad_sync] allreduce_bucket_mb must be positive, got ", bucket_mb);
  FT_CHECK_ARG(wire == DType::F32 || wire == DType::BF16, "[grad_sync] the gradient wire dtype is f32 or bf16, got ",
               wire);
  if (wire == DType::BF16) wire_ = Tensor::zeros({arena.numel()}, DType::BF16, arena.device());
  const auto bucket_elems = static_cast<int64_t>(bucket_mb * 1024.0 * 1024.0 / 4.0);

  // Entries sorted by offset walk the arena front to back; a bucket closes once it holds at least
  // bucket_elems elements.
  const std::vector<ParamArena::Entry>& entries = arena.entries();
  std::vector<size_t> by_offset(entries.size());
  for (size_t i = 0; i < by_offset.size(); ++i) by_offset[i] = i;
  std::sort(by_offset.begin(), by_offset.end(),
            [&](size_t a, size_t b) { return entries[a].offset < entries[b].offset; });
  std::vector<int> bucket_of(entries.size(), 0);
  for (size_t k = 0; k < by_offset.size(); ++k) {
    const ParamArena::Entry& e = entries[by_offset[k]];
    if (buckets_.empty() || buckets_.back().end - buckets_.back().begin >= bucket_elems) {
      if (!buckets_.empty()) buckets_.back().end = e.offset;
      buckets_.push_back({e.offset, e.offset, 0});
    }
    Bucket& b = buckets_.back();
    b.end = e.offset + shape_numel(e.shape);
    ++b.tensors;
    bucket_of[by_offset[k]] = static_cast<int>(buckets_.size()) - 1;
  }
  if (!buckets_.empty()) {
    buckets_.front().begin = 0;
    buckets_.back().end = arena.numel();  // trailing padding rides with the last bucket
  }
  remaining_.assign(buckets_.size(), 0);
  launched_.assign(buckets_.size(), false);

  size_t i = 0;
  model.for_each_parameter([&](const std::string& name, const Tensor& p) {
    FT_ASSERT(i < entries.size() && entries[i].name == name, "parameter ", name, " is not the arena's entry ", i);
    const int b = bucket_of[i++];
    autograd::set_grad_ready_hook(p, [this, b] { on_ready(b); });
    hooked_.push_back(p);
  });
  FT_ASSERT(i == entries.size());
}

GradSync::~GradSync() {
  for (const Tensor& p : hooked_) autograd::set_grad_ready_hook(p, nullptr);
}

void GradSync::arm() {
  if (!overlap_) return;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    remaining_[b] = buckets_[b].tensors;
    launched_[b] = false;
  }
  armed_ = true;
}

void GradSync::on_ready(int b) {
  // A hook fires once per backward pass per leaf (autograd's contract), so counting down is exact.
  if (!armed_ || launched_[b]) return;
  if (--remaining_[b] == 0) launch(b);
}

void GradSync::launch(int b) {
  const Bucket& k = buckets_[b];
  if (launcher_) {
    launcher_(k.begin, k.end);
    launched_[b] = true;
    return;
  }
  const Tensor grads = arena_.grads().slice(0, k.begin, k.end);
  Tensor sent = grads;
  if (wire_.defined()) {
    // On the compute stream, right behind the bucket's last gradient kernel: a cast of 25 MiB is
    // a few microseconds there, and the comm stream then carries only collectives.
    autograd::NoGradGuard no_grad;
    sent = wire_.slice(0, k.begin, k.end);
    ops::cast_into(sent, grads);
  }
  // The bucket was written on the compute stream; the all-reduce must see it.
  comm_.comm_waits_for_compute();
  comm_.all_reduce_sum_(sent);
  launched_[b] = true;
}

void GradSync::complete() {
  if (launcher_) return;  // the launcher's owner completes the sum
  comm_.compute_waits_for_comm();
  if (wire_.defined()) {
    autograd::NoGradGuard no_grad;
    ops::cast_into(arena_.grads(), wire_);
  }
}

void GradSync::finish() {
  if (!armed_) {
    sync_all();
    return;
  }
  armed_ = false;
  launched_early_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (launched_[b]) ++launched_early_;
    else launch(static_cast<int>(b));
  }
  complete();
}

void GradSync::sync_all() {
  armed_ = false;
  launched_early_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) launch(static_cast<int>(b));
  complete();
}

}  // namespace ft
