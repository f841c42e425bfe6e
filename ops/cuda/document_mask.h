// CUDA document starts (ops/document_mask.h): plain-old-data arguments and the launcher.
#pragma once

#include <cstdint>

#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct DocumentStartsParams {
  const int32_t* tokens = nullptr;  // (rows, T) contiguous
  int32_t* doc_start = nullptr;     // (rows, T) contiguous
  int64_t rows = 0, T = 0;
  int32_t eot_token = 0;
};

// One CTA per row: an inclusive max-scan of (t where tokens[t] == eot, else 0).
FT_CUDA_LAUNCHER(void document_starts(const DocumentStartsParams& p, Stream stream));

}  // namespace ft::cuda
