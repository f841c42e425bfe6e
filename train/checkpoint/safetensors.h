// The safetensors file format (https://github.com/huggingface/safetensors), written and read
// without Python so checkpoints load directly into PyTorch and Hugging Face tools:
//
//   bytes [0, 8)        N, the header length, uint64 little-endian
//   bytes [8, 8+N)      JSON header: {"__metadata__": {str: str} (optional),
//                        name: {"dtype": "F32", "shape": [d0, ...], "data_offsets": [begin, end)}}
//                       padded with spaces so 8+N is a multiple of 8
//   bytes [8+N, EOF)    the data; offsets are relative to its start; the tensors cover it exactly
//                       (no holes, no overlaps); each tensor is C-contiguous and little-endian
//
// Dtypes: F32 BF16 F16 F64 I32 I64 U16 U8 (ft::DType's set); other safetensors dtypes are named
// and refused. The writer orders tensors by item size (largest first, stable), so with the padded
// header every tensor starts at a multiple of its item size, as the reference writer does.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ft {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

using StringPairs = std::vector<std::pair<std::string, std::string>>;

// "F32", "BF16", ...
const char* safetensors_dtype_name(DType t);

// Writes `tensors` (any device, any strides; copied to CPU as needed) to <path>.tmp.<pid> and
// renames it to <path>. Names must be unique and non-empty. Hugging Face's from_pretrained wants
// metadata {"format": "pt"} in model files.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const StringPairs& metadata = {});

struct SafetensorsFile {
  std::string path;
  std::vector<NamedTensor> tensors;  // CPU, contiguous, in data-offset order
  StringPairs metadata;

  const Tensor* find(const std::string& name) const;  // nullptr when absent
  const Tensor& at(const std::string& name) const;    // throws "<path>: no tensor 'name'"
  const std::string* find_metadata(const std::string& key) const;
};

// Reads and validates the whole file: header length against the file size, the JSON, every
// entry's dtype, shape and offsets, shape x item size = byte span, and that the tensors tile the
// data section exactly. Each problem is an ft::Error "<path>: <problem>".
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace ft
