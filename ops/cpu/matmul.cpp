#include "ops/cpu/matmul.h"

#include <Eigen/Core>

namespace ft::cpu {

template <class T>
void matmul(const T* a, const T* b, T* d, const T* bias, const MatmulGeometry& g) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using RowVec = Eigen::Matrix<T, 1, Eigen::Dynamic>;
  using ConstMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  using Map = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
  const T alpha = static_cast<T>(g.alpha);
  const T beta = static_cast<T>(g.beta);

  for (int64_t i = 0; i < g.batch; ++i) {
    // Stored shapes: a is (k, m) when transposed, b is (n, k) when transposed.
    const ConstMap A(a + i * g.stride_a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k,
                     Eigen::OuterStride<>(g.lda));
    const ConstMap B(b + i * g.stride_b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n,
                     Eigen::OuterStride<>(g.ldb));
    Map D(d + i * g.stride_d, g.m, g.n, Eigen::OuterStride<>(g.ldd));

    // Each transpose combination is a different Eigen expression type, hence the generic lambda.
    auto run = [&](const auto& op_a, const auto& op_b) {
      if (g.beta == 0.f) {
        D.noalias() = alpha * (op_a * op_b);  // never reads D: its old contents may be garbage
      } else {
        D = beta * D;
        D.noalias() += alpha * (op_a * op_b);
      }
    };
    if (!g.trans_a && !g.trans_b) run(A, B);
    else if (!g.trans_a && g.trans_b) run(A, B.transpose());
    else if (g.trans_a && !g.trans_b) run(A.transpose(), B);
    else run(A.transpose(), B.transpose());

    if (bias) D.rowwise() += Eigen::Map<const RowVec>(bias, g.n);
  }
}

template void matmul<float>(const float*, const float*, float*, const float*, const MatmulGeometry&);
template void matmul<double>(const double*, const double*, double*, const double*, const MatmulGeometry&);

}  // namespace ft::cpu
