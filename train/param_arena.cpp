#include "train/param_arena.h"

#include <algorithm>
#include <map>

#include "autograd/variable.h"
#include "ops/elementwise.h"

namespace ft {

namespace {
int64_t align_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }
}  // namespace

ParamArena::ParamArena(nn::Module& model, Device device, DType compute_dtype)
    : device_(device), compute_dtype_(compute_dtype) {
  FT_CHECK_ARG(compute_dtype == DType::F32 || compute_dtype == DType::BF16 || compute_dtype == DType::F16,
               "[param_arena] compute dtype must be f32, bf16 or f16, got ", dtype_name(compute_dtype));
  // Two passes over the model: decayed tensors first, then the rest, so each group is one region.
  for (const bool decay : {true, false}) {
    const int64_t begin = numel_;
    model.for_each_parameter([&](const std::string& name, const Tensor& p) {
      if ((p.dim() >= 2) != decay) return;
      entries_.push_back({name, p.shape(), numel_, decay});
      numel_ = align_up(numel_ + p.numel(), kAlign);
    });
    (decay ? decay_ : no_decay_) = Region{begin, numel_};
  }
  // entries_ is in region order; put it back in model order for master_tensors() and checkpoints.
  std::map<std::string, Entry> by_name;
  for (const Entry& e : entries_) by_name[e.name] = e;
  entries_.clear();
  model.for_each_parameter([&](const std::string& name, const Tensor&) { entries_.push_back(by_name.at(name)); });

  master_ = Tensor::zeros({numel_}, DType::F32, device);
  grads_ = Tensor::zeros({numel_}, DType::F32, device);
  if (compute_dtype != DType::F32) working_ = Tensor::zeros({numel_}, compute_dtype, device);

  autograd::NoGradGuard no_grad;
  const std::vector<std::string> fp32 = model.fp32_parameter_names();
  size_t i = 0;
  model.for_each_parameter([&](const std::string& name, Tensor& p) {
    Entry& e = entries_[i++];
    FT_ASSERT(e.name == name);
    FT_CHECK_ARG(p.device() == device, "[param_arena] parameter '", name, "' is on ", p.device(), ", the arena on ",
                 device);
    Tensor master = view(master_, e);
    master.copy_(ops::cast(p.detach(), DType::F32));
    // A parameter that stays fp32 (nn::Module::register_parameter) computes with its master; its
    // slot of the working copy goes unused.
    e.stays_fp32 = std::find(fp32.begin(), fp32.end(), name) != fp32.end();
    Tensor leaf = working_.defined() && !e.stays_fp32 ? view(working_, e) : master;
    if (leaf.data_ptr() != master.data_ptr()) leaf.copy_(ops::cast(master, compute_dtype));
    p = leaf.detach();  // a fresh handle, so the autograd slot is the leaf's own
    autograd::set_requires_grad(p);
    autograd::set_grad(p, view(grads_, e));
  });
}

Tensor ParamArena::view(const Tensor& buffer, const Entry& e) const {
  return buffer.slice(0, e.offset, e.offset + shape_numel(e.shape)).view(e.shape);
}

int64_t ParamArena::num_parameters() const {
  int64_t n = 0;
  for (const Entry& e : entries_) n += shape_numel(e.shape);
  return n;
}

std::vector<NamedTensor> ParamArena::master_tensors() const {
  std::vector<NamedTensor> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.push_back({e.name, view(master_, e)});
  return out;
}

void ParamArena::load_master(const std::vector<NamedTensor>& weights) {
  std::map<std::string, const Tensor*> by_name;
  for (const NamedTensor& w : weights) by_name[w.name] = &w.tensor;
  autograd::NoGradGuard no_grad;
  for (const Entry& e : entries_) {
    const auto it = by_name.find(e.name);
    FT_CHECK_ARG(it != by_name.end(), "[param_arena] the weights have no tensor '", e.name, "'");
    const Tensor& w = *it->second;
    FT_CHECK_ARG(w.shape() == e.shape, "[param_arena] tensor '", e.name, "' has shape ", w.shape(), ", the model ",
                 e.shape);
    view(master_, e).copy_(ops::cast(w.to(device_), DType::F32));
  }
  FT_CHECK_ARG(by_name.size() == entries_.size(), "[param_arena] the weights hold ", by_name.size(),
               " tensors, the model ", entries_.size());
  refresh_working();
}

void ParamArena::refresh_working() {
  if (!working_.defined()) return;
  autograd::NoGradGuard no_grad;
  working_.copy_(ops::cast(master_, compute_dtype_));
}

}  // namespace ft
