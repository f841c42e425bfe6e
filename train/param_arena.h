// The parameter arena: every model parameter a view into one flat fp32 master buffer, every
// gradient a view into one flat fp32 gradient buffer (DESIGN.md section 3), so zeroing, the norm,
// AdamW and (later) the all-reduce are each one call over one buffer.
//
// Layout. Parameters are placed in two contiguous regions: first every tensor of dim >= 2 (the
// matrices and the embeddings: weight decay applies), then every tensor of dim 1 (biases and
// LayerNorm gains: no weight decay), each region in model order. Every tensor starts on a multiple
// of kAlign elements; the padding between them is zero in every buffer and stays zero under AdamW
// (zero gradient, zero weight), so a region can be handed to one kernel as it is.
//
//   master   (N) f32   the weights the optimizer updates
//   grads    (N) f32   autograd adds into views of it (autograd::set_grad)
//   working  (N) bf16 | f16, mixed precision only: the copies the model computes with, rewritten
//            from master by the AdamW pass (ops::adamw_step's working_copy)
//
// The model's leaves (what for_each_parameter sees after construction) are the master views in
// fp32 and the working views in bf16/f16 -- except the parameters the model registered to stay
// fp32 (nn::LayerNorm with fp32_params), whose leaves are their master views in every precision;
// in all cases their gradient is the fp32 grad view (the engine's AccumulateGrad casts a bf16/f16
// gradient to f32 before adding).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "train/checkpoint/safetensors.h"

namespace ft {

class ParamArena {
 public:
  static constexpr int64_t kAlign = 16;  // elements: 64-byte f32 / 32-byte bf16 starts

  struct Entry {
    std::string name;
    Shape shape;
    int64_t offset = 0;  // elements into the buffers
    bool decay = false;  // dim >= 2
    bool stays_fp32 = false;  // the leaf is the master view in every precision (above)
  };
  struct Region {
    int64_t begin = 0, end = 0;  // [begin, end) elements
    int64_t numel() const { return end - begin; }
  };

  // Re-seats every parameter of `model` (already on `device`, any floating dtype) as described
  // above, copying its current values into master. compute_dtype is F32, BF16 or F16.
  ParamArena(nn::Module& model, Device device, DType compute_dtype);

  const Tensor& master() const { return master_; }    // (N) f32
  const Tensor& grads() const { return grads_; }      // (N) f32
  const Tensor& working() const { return working_; }  // (N) bf16/f16, undefined in fp32
  DType compute_dtype() const { return compute_dtype_; }
  Device device() const { return device_; }
  int64_t numel() const { return numel_; }  // padding included
  int64_t num_parameters() const;           // padding excluded
  const std::vector<Entry>& entries() const { return entries_; }
  Region decay_region() const { return decay_; }
  Region no_decay_region() const { return no_decay_; }

  void zero_grads() { grads_.zero_(); }
  // The master weights as named views (shapes of the model), in model order.
  std::vector<NamedTensor> master_tensors() const;
  // Copies weights by name into master (every entry must be present with its shape; any device
  // and floating dtype), then refreshes the working copy. Throws naming the tensor.
  void load_master(const std::vector<NamedTensor>& weights);
  // working = round(master); a no-op in fp32.
  void refresh_working();

  // A region of a buffer as a flat contiguous view.
  static Tensor region_of(const Tensor& buffer, Region r) { return buffer.slice(0, r.begin, r.end); }

 private:
  Tensor view(const Tensor& buffer, const Entry& e) const;

  Device device_;
  DType compute_dtype_;
  std::vector<Entry> entries_;  // model order
  Region decay_, no_decay_;
  int64_t numel_ = 0;
  Tensor master_, grads_, working_;
};

}  // namespace ft
