// Element types. The set is closed: adding one means touching every dispatch switch, on purpose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>

namespace ft {

// F64 exists for CPU reference computations (the float64 gradient check); CUDA ops reject it.
enum class DType : uint8_t { F32, BF16, F16, I32, I64, U16, U8, F64 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool is_floating(DType t);  // f32, bf16, f16, f64
inline bool is_half(DType t) { return t == DType::BF16 || t == DType::F16; }

inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace ft
