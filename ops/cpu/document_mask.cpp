#include "ops/cpu/document_mask.h"

namespace ft::cpu {

void document_starts(const int32_t* tokens, int32_t* doc_start, int64_t rows, int64_t T, int32_t eot_token) {
  for (int64_t r = 0; r < rows; ++r) {
    int32_t start = 0;  // tokens before the row's first eot: a segment of their own from 0
    for (int64_t t = 0; t < T; ++t) {
      if (tokens[r * T + t] == eot_token) start = static_cast<int32_t>(t);
      doc_start[r * T + t] = start;
    }
  }
}

}  // namespace ft::cpu
