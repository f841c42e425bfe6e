#include "nn/init.h"

#include <cmath>
#include <string>
#include <vector>

namespace ft::nn {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void init_normal_(Tensor& t, double std, std::mt19937_64& rng) {
  std::normal_distribution<double> dist(0.0, std);
  std::vector<double> values(static_cast<size_t>(t.numel()));
  for (double& x : values) x = dist(rng);
  t.copy_(Tensor::from_doubles(values, t.shape(), t.dtype()).to(t.device()));
}

void init_constant_(Tensor& t, double value) { t.fill_(value); }

void init_gpt2_parameters(Module& model, double std, int64_t n_layers, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double residual_std = std / std::sqrt(2.0 * static_cast<double>(n_layers));
  model.for_each_parameter([&](const std::string& name, Tensor& p) {
    if (ends_with(name, ".bias")) init_constant_(p, 0.0);
    else if (p.dim() == 1) init_constant_(p, 1.0);  // LayerNorm gains
    else if (ends_with(name, "c_proj.weight")) init_normal_(p, residual_std, rng);
    else init_normal_(p, std, rng);
  });
}

}  // namespace ft::nn
