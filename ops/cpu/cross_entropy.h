// Reference cross-entropy kernels fused with log-softmax (contiguous buffers, T = float or
// double). Targets are validated by the caller: each is ignore_index or in [0, V).
#pragma once

#include <cstdint>

namespace ft::cpu {

// Per row: lse = log(sum(exp(logits))), loss = lse - logits[target]; both 0 for ignored rows.
// logits (rows, V); targets, loss, lse (rows).
template <class T>
void cross_entropy_forward(const T* logits, const int32_t* targets, T* loss, T* lse, int64_t rows,
                           int64_t vocab, int32_t ignore_index);

// dlogits = (exp(logits - lse) - onehot(target)) * dloss[row]; zero rows where ignored.
template <class T>
void cross_entropy_backward(const T* logits, const int32_t* targets, const T* lse, const T* dloss,
                            T* dlogits, int64_t rows, int64_t vocab, int32_t ignore_index);

}  // namespace ft::cpu
