// Our GPT-2 parameter names <-> Hugging Face GPT2LMHeadModel names, and the HF config.json.
//
// Our names (the contract nn/gpt follows; Linear weights are (out, in), as PyTorch's nn.Linear):
//   wte.weight                 (V, C)       -> transformer.wte.weight       (V, C)
//   wpe.weight                 (Tmax, C)    -> transformer.wpe.weight       (Tmax, C)
//   h.{i}.ln_1.weight|bias    (C)          -> transformer.h.{i}.ln_1.weight|bias
//   h.{i}.attn.c_attn.weight     (3C, C)      -> transformer.h.{i}.attn.c_attn.weight (C, 3C)
//   h.{i}.attn.c_attn.bias       (3C)         -> transformer.h.{i}.attn.c_attn.bias
//     (3C is (H + 2 H_kv) D with grouped-query attention, below)
//   h.{i}.attn.c_proj.weight    (C, C)       -> transformer.h.{i}.attn.c_proj.weight (C, C)^T
//   h.{i}.attn.c_proj.bias      (C)          -> transformer.h.{i}.attn.c_proj.bias
//   h.{i}.ln_2.weight|bias    (C)          -> transformer.h.{i}.ln_2.weight|bias
//   h.{i}.mlp.c_fc.weight       (F, C)       -> transformer.h.{i}.mlp.c_fc.weight    (C, F)
//   h.{i}.mlp.c_fc.bias         (F)          -> transformer.h.{i}.mlp.c_fc.bias
//   h.{i}.mlp.c_proj.weight     (C, F)       -> transformer.h.{i}.mlp.c_proj.weight  (F, C)
//   h.{i}.mlp.c_proj.bias       (C)          -> transformer.h.{i}.mlp.c_proj.bias
//   ln_f.weight|bias               (C)          -> transformer.ln_f.weight|bias
//
// HF's Conv1D stores its weight as (in, out), so the four matrix weights per block are
// transposed on the way out and back. The rows of c_attn.weight are [q; k; v], heads contiguous
// within each (head h owns rows h*D .. h*D+D-1 of q), which after the transpose is exactly HF's
// c_attn column split. The output head is tied to the token embedding: HF saves tied models
// without lm_head.weight (GPT2LMHeadModel lists it in _tied_weights_keys and re-ties on load),
// so we write none; on reading we accept an lm_head.weight only when it equals wte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/checkpoint/safetensors.h"
#include "train/config/config.h"
#include "train/config/json.h"

namespace ft {

// Grouped-query attention (n_kv_head < n_head): GPT-2 has none, so such a model is written with the
// same names and layout (c_attn (H + 2 H_kv) D wide) but a config.json whose model_type is
// kGqaModelType, not "gpt2": Hugging Face refuses it by name ("does not recognize this
// architecture") instead of failing on a c_attn shape, and flashtrain reads it back (resume,
// sample, eval). Its n_kv_head key holds H_kv.
inline constexpr const char* kGqaModelType = "flashtrain_gpt2_gqa";

// The shape facts both sides must agree on.
struct Gpt2Dims {
  int64_t vocab_size = 0, n_positions = 0, n_embd = 0, n_layer = 0, n_head = 0, n_inner = 0;
  int64_t n_kv_head = 0;  // 0 means n_head (GPT-2)
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  bool grouped() const { return kv_heads() != n_head; }
  int64_t qkv_dim() const { return n_embd + 2 * kv_heads() * (n_embd / n_head); }  // c_attn rows
  static Gpt2Dims from_config(const TrainConfig& cfg);
  bool operator==(const Gpt2Dims& o) const;
};

// Our parameter names for a model of `n_layers` blocks, in model order.
std::vector<std::string> gpt2_param_names(int64_t n_layers);
// The HF name of one of ours ("h.3.mlp.c_fc.weight" -> "transformer.h.3.mlp.c_fc.weight"),
// and whether the tensor is transposed on the way. Throws on a name outside the table.
std::string hf_gpt2_name(const std::string& ours, bool* transposed = nullptr);

// The shape of one of our parameters (our orientation). Throws on a name outside the table.
Shape gpt2_param_shape(const std::string& ours, const Gpt2Dims& dims);

// Ours -> HF: every one of our parameters must be present exactly once with the shape `dims`
// implies; returns them in model order with HF names, Conv1D weights transposed (CPU tensors).
std::vector<NamedTensor> to_hf_gpt2(const std::vector<NamedTensor>& ours, const Gpt2Dims& dims);
// HF -> ours. Accepts names with or without the "transformer." prefix (GPT2Model saves them
// bare, as the hub's gpt2 files do); ignores the attention-mask buffers older versions saved
// (h.{i}.attn.bias, h.{i}.attn.masked_bias); accepts lm_head.weight only equal to wte. Missing,
// unexpected or wrongly shaped tensors are errors naming the tensor and shapes.
std::vector<NamedTensor> from_hf_gpt2(const std::vector<NamedTensor>& hf, const Gpt2Dims& dims);

// The GPT2Config of a flashtrain model, as config.json for GPT2LMHeadModel.from_pretrained.
Json hf_gpt2_config_json(const TrainConfig& cfg);
// The dims a config.json describes (n_inner null means 4 * n_embd, as in GPT2Config).
Gpt2Dims gpt2_dims_from_hf_config(const Json& config, const std::string& source = "config.json");

}  // namespace ft
