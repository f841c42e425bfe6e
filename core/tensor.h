// The tensor: a handle on a shared impl {storage, offset, shape, strides (elements), dtype,
// device, one opaque autograd slot}. Copying a Tensor copies the handle; views (reshape,
// permute, slice) share storage. Compute lives in ops/; gradients live in autograd/.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"
#include "core/shape.h"
#include "core/storage.h"

namespace ft {

// autograd/ derives from this; core only stores it, so core knows nothing of gradients.
struct AutogradMetaBase {
  virtual ~AutogradMetaBase() = default;
};

template <class T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of<f16> { static constexpr DType value = DType::F16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::U16; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // elements
  Shape shape;
  Strides strides;
  DType dtype = DType::F32;
  Device device;
  std::shared_ptr<AutogradMetaBase> autograd;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  // ---- creation ----
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  // Host memory that CUDA can copy from asynchronously (for data loading).
  static Tensor empty_pinned(const Shape& shape, DType dtype);
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype, Device device = Device::cpu());
  // A CPU tensor holding a copy of `values` (values.size() must equal the shape's numel).
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  // A CPU tensor of a floating dtype from float values (rounded to bf16/f16 as needed).
  static Tensor from_floats(const std::vector<float>& values, const Shape& shape, DType dtype);
  // A CPU tensor of any floating dtype from double values (for references and gradcheck).
  static Tensor from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype);

  // ---- properties ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int dim() const { return static_cast<int>(impl().shape.size()); }
  int64_t size(int axis) const;
  int64_t stride(int axis) const;
  int64_t numel() const { return shape_numel(impl().shape); }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  size_t itemsize() const { return dtype_size(impl().dtype); }
  size_t nbytes() const { return numel() * itemsize(); }
  Device device() const { return impl().device; }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  // True when both handles refer to the same impl (not merely the same storage).
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // Address of element 0 (storage base + offset).
  void* data_ptr() const;
  // Typed address of element 0; throws when T does not match the dtype.
  template <class T>
  T* data() const;

  // ---- views (share storage) ----
  // Requires a layout that can be viewed without a copy (contiguous, or strided so that only
  // self-contiguous runs of dims are split or merged); one dimension may be -1.
  Tensor view(const Shape& shape) const;
  // A view when possible, else a contiguous copy.
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const std::vector<int>& order) const;
  Tensor transpose(int a, int b) const;
  // Elements [start, end) along `axis`.
  Tensor slice(int axis, int64_t start, int64_t end) const;
  // Drops `axis` at `index`.
  Tensor select(int axis, int64_t index) const;
  Tensor unsqueeze(int axis) const;

  // ---- copies ----
  Tensor contiguous() const;  // this tensor itself when already contiguous
  Tensor clone() const;       // always a new contiguous tensor
  Tensor to(Device d) const;  // this tensor itself when already on d
  // Copies src into this tensor (same shape and dtype; any devices, any strides).
  void copy_(const Tensor& src);
  void zero_();
  void fill_(double value);
  // A new handle on the same storage and layout without the autograd slot.
  Tensor detach() const;

  // Host copies of the values: to_vector<T> needs T to match the dtype; to_floats converts any
  // floating dtype to float. Both synchronise when the tensor is on a GPU.
  template <class T>
  std::vector<T> to_vector() const;
  std::vector<float> to_floats() const;
  std::vector<double> to_doubles() const;
  // Value of a one-element tensor as double.
  double item() const;

  // ---- autograd slot (used by autograd/ only) ----
  const std::shared_ptr<AutogradMetaBase>& autograd_meta() const { return impl().autograd; }
  void set_autograd_meta(std::shared_ptr<AutogradMetaBase> m) const { impl().autograd = std::move(m); }

  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
  TensorImpl& impl() const {
    FT_CHECK_ARG(impl_, "use of an undefined tensor");
    return *impl_;
  }
  Tensor with_layout(Shape shape, Strides strides, int64_t offset) const;

  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);  // "Tensor(f32, (2, 3), cuda:0)"

// Whether t (..., R, C), at least 2-D, is a stack of rows: unit column stride, rows at least C
// apart, and leading dims that merge into the rows, so t.view({-1, C}) needs no copy. Contiguous
// tensors are; so are the first C columns of a wider row-major buffer (padded rows).
bool rows_collapse(const Tensor& t);

// ---- template definitions ----
template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  FT_CHECK_ARG(static_cast<int64_t>(values.size()) == shape_numel(shape), "[from_vector] ",
               values.size(), " values do not fill shape ", shape);
  Tensor t = empty(shape, dtype_of<T>::value, Device::cpu());
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(T));
  return t;
}

template <class T>
T* Tensor::data() const {
  FT_CHECK_ARG(dtype_of<T>::value == dtype(), "[data] tensor is ", dtype(), ", asked for ",
               dtype_name(dtype_of<T>::value));
  return static_cast<T*>(data_ptr());
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  FT_CHECK_ARG(dtype_of<T>::value == dtype(), "[to_vector] tensor is ", dtype(), ", asked for ",
               dtype_name(dtype_of<T>::value));
  Tensor host = to(Device::cpu()).contiguous();
  std::vector<T> out(static_cast<size_t>(numel()));
  if (!out.empty()) std::memcpy(out.data(), host.data_ptr(), out.size() * sizeof(T));
  return out;
}

}  // namespace ft
