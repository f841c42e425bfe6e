// CPU reference of ops::document_starts (ops/document_mask.h): a running maximum along each row.
#pragma once

#include <cstdint>

namespace ft::cpu {

// tokens, doc_start: (rows, T) contiguous int32.
void document_starts(const int32_t* tokens, int32_t* doc_start, int64_t rows, int64_t T, int32_t eot_token);

}  // namespace ft::cpu
