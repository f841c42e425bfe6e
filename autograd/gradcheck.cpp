#include "autograd/gradcheck.h"

#include <cmath>
#include <random>

#include "autograd/variable.h"
#include "ops/elementwise.h"

namespace ft::autograd {
namespace {

double weighted_sum(const Tensor& out, const std::vector<double>& upstream) {
  const std::vector<double> v = out.to_doubles();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * upstream[i];
  return s;
}

bool skipped(const GradcheckOptions& o, int i) {
  for (int s : o.skip)
    if (s == i) return true;
  return false;
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs0, const GradcheckOptions& opts) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < inputs0.size(); ++i) {
    const Tensor& x = inputs0[i];
    const bool check = is_floating(x.dtype()) && !skipped(opts, static_cast<int>(i));
    Tensor c = check ? ops::cast(x.to(Device::cpu()), DType::F64).clone() : x.to(Device::cpu()).clone();
    if (check) set_requires_grad(c);
    inputs.push_back(c);
  }

  const Tensor out = fn(inputs);
  FT_CHECK_ARG(out.dtype() == DType::F64, "[gradcheck] fn must compute in f64 for f64 inputs, got ", out.dtype());
  std::mt19937_64 rng(opts.seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> upstream(static_cast<size_t>(out.numel()));
  for (double& u : upstream) u = dist(rng);
  backward(out, Tensor::from_vector(upstream, out.shape()));

  GradcheckResult r;
  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!requires_grad(inputs[i])) continue;
    const Tensor g = grad(inputs[i]);
    const std::vector<double> analytic = g.defined() ? g.to_doubles() : std::vector<double>(inputs[i].numel(), 0.0);
    double* x = inputs[i].data<double>();
    for (int64_t j = 0; j < inputs[i].numel(); ++j) {
      const double saved = x[j];
      x[j] = saved + opts.step;
      const double plus = weighted_sum(fn(inputs), upstream);
      x[j] = saved - opts.step;
      const double minus = weighted_sum(fn(inputs), upstream);
      x[j] = saved;
      const double numeric = (plus - minus) / (2 * opts.step);
      const double err = std::fabs(analytic[j] - numeric);
      r.max_abs_error = std::max(r.max_abs_error, err);
      if (r.ok && !(err <= opts.atol + opts.rtol * std::fabs(numeric))) {
        r.ok = false;
        r.message = str("input ", i, " element ", j, ": analytic ", analytic[j], ", numeric ", numeric);
      }
    }
  }
  return r;
}

}  // namespace ft::autograd
