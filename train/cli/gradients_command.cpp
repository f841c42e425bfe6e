#include "train/cli/gradients_command.h"

#include <iomanip>
#include <ostream>

#include "autograd/variable.h"
#include "ops/elementwise.h"
#include "train/checkpoint/hf_gpt2_names.h"
#include "train/checkpoint/safetensors.h"
#include "train/device_batch.h"
#include "train/inference_model.h"

namespace ft {

int run_gradients(const GradientsOptions& options, std::ostream& out, std::ostream&) {
  InferenceModel m = load_inference_model(options.checkpoint);
  Loader loader(file_order_loader_options(m, options.data, options.batch_size, options.seq_len, "gradients"));
  const Batch batch = loader.next();
  const int64_t B = batch.B, T = batch.T;

  // f32 gradient buffers preset on every parameter: backward adds into them (a bf16 parameter's
  // gradient is widened before the add, as in the trainer's arena), so the sums are f32.
  std::vector<NamedTensor> grads;
  for (const auto& [name, p] : m.model->named_parameters()) {
    autograd::set_requires_grad(p);
    const Tensor g = Tensor::zeros(p.shape(), DType::F32, m.device);
    autograd::set_grad(p, g);
    grads.push_back({name, g});
  }
  const DeviceBatch b = to_device(batch, m.device);
  const nn::GPTOutput o = m.model->forward(b.inputs, b.targets, b.tokens());
  // Read before backward: the head's backward reuses the logits' buffer for dlogits (nn::GPTOutput).
  const Tensor logits = ops::cast(o.logits.detach(), DType::F32).to(Device::cpu()).clone();
  autograd::backward(o.loss);

  std::vector<NamedTensor> file;
  file.push_back({"tokens", Tensor::from_vector(std::vector<int32_t>(batch.tokens, batch.tokens + B * (T + 1)), {B, T + 1})});
  file.push_back({"logits", logits});
  file.push_back({"loss", ops::cast(o.loss.detach(), DType::F32).reshape({1}).to(Device::cpu())});
  std::vector<NamedTensor> cpu_grads;
  for (const auto& g : grads) cpu_grads.push_back({g.name, g.tensor.to(Device::cpu())});
  for (auto& g : to_hf_gpt2(cpu_grads, Gpt2Dims::from_config(m.config))) file.push_back({"grad." + g.name, g.tensor});
  save_safetensors(options.out, file, {{"checkpoint", options.checkpoint}});

  out << "gradients: loss " << std::fixed << std::setprecision(5) << o.loss.item() << " on " << B << " x " << T
      << " tokens; logits and " << grads.size() << " parameter gradients written to " << options.out << "\n";
  return 0;
}

}  // namespace ft
