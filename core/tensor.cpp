#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/cuda/copy.h"

namespace ft {
namespace {

// Copies elements between two CPU layouts of the same shape, one element size at a time.
template <class T>
void cpu_strided_copy(T* dst, const Strides& ds, const T* src, const Strides& ss, const Shape& shape) {
  const int nd = static_cast<int>(shape.size());
  const int64_t n = shape_numel(shape);
  if (n == 0) return;
  std::vector<int64_t> idx(nd, 0);
  int64_t doff = 0, soff = 0;
  for (int64_t i = 0; i < n; ++i) {
    dst[doff] = src[soff];
    for (int d = nd - 1; d >= 0; --d) {  // odometer increment
      if (++idx[d] < shape[d]) {
        doff += ds[d];
        soff += ss[d];
        break;
      }
      doff -= ds[d] * (shape[d] - 1);
      soff -= ss[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

void cpu_copy(const Tensor& dst, const Tensor& src) {
  if (dst.is_contiguous() && src.is_contiguous()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), src.nbytes());
    return;
  }
  switch (src.itemsize()) {
    case 1: cpu_strided_copy(static_cast<uint8_t*>(dst.data_ptr()), dst.strides(), static_cast<const uint8_t*>(src.data_ptr()), src.strides(), src.shape()); break;
    case 2: cpu_strided_copy(static_cast<uint16_t*>(dst.data_ptr()), dst.strides(), static_cast<const uint16_t*>(src.data_ptr()), src.strides(), src.shape()); break;
    case 4: cpu_strided_copy(static_cast<uint32_t*>(dst.data_ptr()), dst.strides(), static_cast<const uint32_t*>(src.data_ptr()), src.strides(), src.shape()); break;
    case 8: cpu_strided_copy(static_cast<uint64_t*>(dst.data_ptr()), dst.strides(), static_cast<const uint64_t*>(src.data_ptr()), src.strides(), src.shape()); break;
    default: FT_ASSERT(false, "element size ", src.itemsize());
  }
}

void cuda_copy_same_device(const Tensor& dst, const Tensor& src) {
  FT_CHECK_ARG(src.dim() <= cuda::kMaxCopyDims, "[copy] at most ", cuda::kMaxCopyDims,
               " dimensions on CUDA, got shape ", src.shape());
  if (dst.is_contiguous() && src.is_contiguous()) {
    cuda::copy_bytes(dst.data_ptr(), src.data_ptr(), src.nbytes(), true, true, stream_for(dst.device()));
    return;
  }
  cuda::StridedCopyParams p;
  p.dst = dst.data_ptr();
  p.src = src.data_ptr();
  p.ndim = src.dim();
  p.elem_size = static_cast<int>(src.itemsize());
  p.numel = src.numel();
  for (int d = 0; d < src.dim(); ++d) {
    p.shape[d] = src.size(d);
    p.dst_strides[d] = dst.stride(d);
    p.src_strides[d] = src.stride(d);
  }
  cuda::strided_copy(p, stream_for(dst.device()));
}

template <class T>
void cpu_fill(void* dst, int64_t n, T v) {
  std::fill(static_cast<T*>(dst), static_cast<T*>(dst) + n, v);
}

void cpu_fill_contiguous(void* dst, int64_t n, DType dtype, double value) {
  switch (dtype) {
    case DType::F32: cpu_fill(dst, n, static_cast<float>(value)); break;
    case DType::BF16: cpu_fill(dst, n, float_to_bf16(static_cast<float>(value)).bits); break;
    case DType::F16: cpu_fill(dst, n, float_to_f16(static_cast<float>(value)).bits); break;
    case DType::I32: cpu_fill(dst, n, static_cast<int32_t>(value)); break;
    case DType::I64: cpu_fill(dst, n, static_cast<int64_t>(value)); break;
    case DType::U16: cpu_fill(dst, n, static_cast<uint16_t>(value)); break;
    case DType::U8: cpu_fill(dst, n, static_cast<uint8_t>(value)); break;
    case DType::F64: cpu_fill(dst, n, value); break;
  }
}

// Strides that view a strided layout as `to` without moving data, if any exist: each run of
// dimensions that is contiguous within itself may be split or merged freely (the algorithm of
// PyTorch's computeStride). A slice q = qkv[..., 0:C] of shape (B, T, C) can so be viewed as
// (B, T, H, D).
std::optional<Strides> view_strides(const Shape& from, const Strides& from_strides, const Shape& to) {
  if (from.empty() || shape_numel(from) == 0) return contiguous_strides(to);
  Strides out(to.size());
  int64_t view_d = static_cast<int64_t>(to.size()) - 1;
  int64_t chunk_stride = from_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(from.size()) - 1; d >= 0; --d) {
    tensor_numel *= from[d];
    const bool chunk_ends = d == 0 || (from[d - 1] != 1 && from_strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || to[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= to[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = from_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, Device d) {
  return d.is_cpu() ? (os << "cpu") : (os << "cuda:" << d.index);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) FT_CHECK_ARG(d >= 0, "[empty] negative dimension in shape ", shape);
  auto impl = std::make_shared<TensorImpl>();
  const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  impl->storage = std::make_shared<Storage>(nbytes, device, allocator_for(device));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  impl->storage = std::make_shared<Storage>(nbytes, Device::cpu(), pinned_allocator());
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = Device::cpu();
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_floats(const std::vector<float>& values, const Shape& shape, DType dtype) {
  FT_CHECK_ARG(static_cast<int64_t>(values.size()) == shape_numel(shape), "[from_floats] ",
               values.size(), " values do not fill shape ", shape);
  Tensor t = empty(shape, dtype, Device::cpu());
  switch (dtype) {
    case DType::F32: std::copy(values.begin(), values.end(), static_cast<float*>(t.data_ptr())); break;
    case DType::BF16: {
      auto* p = static_cast<bf16*>(t.data_ptr());
      for (size_t i = 0; i < values.size(); ++i) p[i] = float_to_bf16(values[i]);
      break;
    }
    case DType::F16: {
      auto* p = static_cast<f16*>(t.data_ptr());
      for (size_t i = 0; i < values.size(); ++i) p[i] = float_to_f16(values[i]);
      break;
    }
    case DType::F64: std::copy(values.begin(), values.end(), static_cast<double*>(t.data_ptr())); break;
    default: FT_CHECK_ARG(false, "[from_floats] dtype ", dtype, " is not floating");
  }
  return t;
}

int64_t Tensor::size(int axis) const { return shape()[normalize_axis(axis, dim(), "size")]; }
int64_t Tensor::stride(int axis) const { return strides()[normalize_axis(axis, dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int d = dim() - 1; d >= 0; --d) {
    if (shape()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= shape()[d];
  }
  return true;
}

bool rows_collapse(const Tensor& t) {
  if (t.dim() < 2 || (t.stride(-1) != 1 && t.size(-1) != 1) || t.stride(-2) < t.size(-1)) return false;
  for (int i = t.dim() - 3; i >= 0; --i)
    if (t.size(i) != 1 && t.stride(i) != t.size(i + 1) * t.stride(i + 1)) return false;
  return true;
}

void* Tensor::data_ptr() const {
  return static_cast<char*>(impl().storage->data()) + impl().offset * static_cast<int64_t>(itemsize());
}

Tensor Tensor::with_layout(Shape shape, Strides strides, int64_t offset) const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = this->impl().storage;
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = dtype();
  impl->device = device();
  return Tensor(std::move(impl));
}

Tensor Tensor::view(const Shape& new_shape) const {
  Shape s = new_shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      FT_CHECK_ARG(infer < 0, "[view] more than one -1 in shape ", new_shape);
      infer = static_cast<int>(i);
    } else {
      FT_CHECK_ARG(s[i] >= 0, "[view] negative dimension in shape ", new_shape);
      known *= s[i];
    }
  }
  if (infer >= 0) {
    FT_CHECK_ARG(known > 0 && numel() % known == 0, "[view] cannot view shape ", shape(), " as ", new_shape);
    s[infer] = numel() / known;
  }
  FT_CHECK_ARG(shape_numel(s) == numel(), "[view] cannot view shape ", shape(), " (", numel(),
               " elements) as ", new_shape);
  if (is_contiguous()) return with_layout(s, contiguous_strides(s), offset());
  const std::optional<Strides> st = view_strides(shape(), strides(), s);
  FT_CHECK_ARG(st.has_value(), "[view] tensor of shape ", shape(), " with strides ", strides(),
               " cannot be viewed as ", new_shape, " without a copy; use reshape, which copies");
  return with_layout(s, *st, offset());
}

Tensor Tensor::reshape(const Shape& new_shape) const {
  return is_contiguous() ? view(new_shape) : contiguous().view(new_shape);
}

Tensor Tensor::permute(const std::vector<int>& order) const {
  FT_CHECK_ARG(static_cast<int>(order.size()) == dim(), "[permute] order has ", order.size(),
               " axes, tensor has shape ", shape());
  Shape s(dim());
  Strides st(dim());
  std::vector<bool> seen(dim(), false);
  for (int i = 0; i < dim(); ++i) {
    const int a = normalize_axis(order[i], dim(), "permute");
    FT_CHECK_ARG(!seen[a], "[permute] axis ", order[i], " repeated");
    seen[a] = true;
    s[i] = shape()[a];
    st[i] = strides()[a];
  }
  return with_layout(s, st, offset());
}

Tensor Tensor::transpose(int a, int b) const {
  std::vector<int> order(dim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[normalize_axis(a, dim(), "transpose")], order[normalize_axis(b, dim(), "transpose")]);
  return permute(order);
}

Tensor Tensor::slice(int axis, int64_t start, int64_t end) const {
  const int a = normalize_axis(axis, dim(), "slice");
  FT_CHECK_ARG(0 <= start && start <= end && end <= shape()[a], "[slice] range [", start, ", ", end,
               ") out of bounds for axis ", axis, " of shape ", shape());
  Shape s = shape();
  s[a] = end - start;
  return with_layout(s, strides(), offset() + start * strides()[a]);
}

Tensor Tensor::select(int axis, int64_t index) const {
  const int a = normalize_axis(axis, dim(), "select");
  FT_CHECK_ARG(0 <= index && index < shape()[a], "[select] index ", index, " out of bounds for axis ",
               axis, " of shape ", shape());
  Shape s = shape();
  Strides st = strides();
  s.erase(s.begin() + a);
  st.erase(st.begin() + a);
  return with_layout(s, st, offset() + index * strides()[a]);
}

Tensor Tensor::unsqueeze(int axis) const {
  const int a = normalize_axis(axis, dim() + 1, "unsqueeze");
  Shape s = shape();
  Strides st = strides();
  const int64_t inner = a < dim() ? strides()[a] * shape()[a] : 1;
  s.insert(s.begin() + a, 1);
  st.insert(st.begin() + a, inner);
  return with_layout(s, st, offset());
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device d) const {
  if (device() == d) return *this;
  Tensor out = empty(shape(), dtype(), d);
  out.copy_(*this);
  return out;
}

void Tensor::copy_(const Tensor& src) {
  FT_CHECK_ARG(src.shape() == shape(), "[copy] shapes differ: destination ", shape(), ", source ", src.shape());
  FT_CHECK_ARG(src.dtype() == dtype(), "[copy] dtypes differ: destination ", dtype(), ", source ",
               src.dtype(), " (use ops::cast)");
  if (numel() == 0) return;
  const Device dd = device(), sd = src.device();
  if (dd.is_cpu() && sd.is_cpu()) return cpu_copy(*this, src);
  if (dd == sd) return cuda_copy_same_device(*this, src);
  if (dd.is_cuda() && sd.is_cuda()) {  // across GPUs: stage through the host, simple and rare
    copy_(src.to(Device::cpu()));
    return;
  }
  // Host <-> device: contiguous bytes over the bus, strides resolved on whichever side needs it.
  const Tensor s = src.contiguous();
  Tensor d = is_contiguous() ? *this : empty(shape(), dtype(), dd);
  const Device gpu = dd.is_cuda() ? dd : sd;
  cuda::copy_bytes(d.data_ptr(), s.data_ptr(), s.nbytes(), dd.is_cuda(), sd.is_cuda(), stream_for(gpu));
  if (!d.is_same(*this)) copy_(d);
}

void Tensor::zero_() { fill_(0.0); }

void Tensor::fill_(double value) {
  if (numel() == 0) return;
  if (!is_contiguous()) {
    copy_(full(shape(), value, dtype(), device()));
    return;
  }
  if (is_cpu()) {
    cpu_fill_contiguous(data_ptr(), numel(), dtype(), value);
  } else {
    cuda::fill(data_ptr(), numel(), dtype(), value, stream_for(device()));
  }
}

Tensor Tensor::detach() const { return with_layout(shape(), strides(), offset()); }

std::vector<float> Tensor::to_floats() const {
  Tensor h = to(Device::cpu()).contiguous();
  const int64_t n = numel();
  std::vector<float> out(static_cast<size_t>(n));
  switch (dtype()) {
    case DType::F32: std::memcpy(out.data(), h.data_ptr(), n * sizeof(float)); break;
    case DType::BF16: for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(h.data<bf16>()[i]); break;
    case DType::F16: for (int64_t i = 0; i < n; ++i) out[i] = f16_to_float(h.data<f16>()[i]); break;
    case DType::I32: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(h.data<int32_t>()[i]); break;
    case DType::I64: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(h.data<int64_t>()[i]); break;
    case DType::U16: for (int64_t i = 0; i < n; ++i) out[i] = h.data<uint16_t>()[i]; break;
    case DType::U8: for (int64_t i = 0; i < n; ++i) out[i] = h.data<uint8_t>()[i]; break;
    case DType::F64: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(h.data<double>()[i]); break;
  }
  return out;
}

std::vector<double> Tensor::to_doubles() const {
  if (dtype() != DType::F64) {
    const std::vector<float> f = to_floats();
    return std::vector<double>(f.begin(), f.end());
  }
  return to_vector<double>();
}

Tensor Tensor::from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (dtype == DType::F64) return from_vector(values, shape);
  return from_floats(std::vector<float>(values.begin(), values.end()), shape, dtype);
}

double Tensor::item() const {
  FT_CHECK_ARG(numel() == 1, "[item] tensor of shape ", shape(), " has ", numel(), " elements, not 1");
  if (dtype() == DType::I64) return static_cast<double>(to_vector<int64_t>()[0]);
  return to_floats()[0];
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  return os << "Tensor(" << t.dtype() << ", " << t.shape() << ", " << t.device() << ")";
}

}  // namespace ft
