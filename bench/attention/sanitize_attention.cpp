// A small flash attention forward + backward over every kernel path, for compute-sanitizer
// (scripts/attention_sanitize.sh runs it under memcheck, racecheck, synccheck and initcheck).
// It checks no numbers (the tests do that); it exists so the sanitizers see each kernel once on
// shapes with partial tiles: D = 64 and 128, causal and full, dropout 0 and 0.1, a block-sparse
// mask, atomic and deterministic dQ (every deterministic design, the stored dS included), the mma.sync, wgmma and
// warp-specialised forwards (both wgmma tiles; the ws forward's forms at D = 64 and 128), and the
// 4-warp, wide and warp-specialised (TMA, mbarriers, bulk adds) backwards; then D = 256, grouped-query attention
// (its K/V gradient sum) and the document mask.
//   sanitize_attention [--quick]   (--quick: one case per kernel instead of the full product)
#include <climits>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/cuda/attention/flash_attention.h"

namespace {

using ft::DType;
using ft::Device;
using ft::Tensor;

Tensor random_cuda(const ft::Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(ft::shape_numel(shape));
  for (auto& e : x) e = dist(gen);
  return Tensor::from_floats(x, shape, DType::BF16).to(Device::cuda());
}

struct Case {
  int D, T;
  bool causal;
  float p;
  int block_size;  // 0 dense; otherwise window 2, global 1
  bool deterministic;
  const char* path;  // which kernel-choice override: "default", "mma", "wgmma-large", "wide", "ws",
                     // "ws-stored" (ws with the deterministic dQ from the stored dS at any head dim),
                     // "ws-fixed" (ws with the fixed-point dQ, which kAuto no longer takes at D = 64),
                     // "ws-ordered" (ws with the ordered dQ at any head dim),
                     // "ws-walk" (ws with the persistent forward's grid capped at 2 CTAs, so that each
                     // CTA walks several query blocks)
  int kv_heads = 2;  // 1: grouped-query (multi-query) attention of the 2 query heads
  int doc_len = 0;   // > 0: a document mask with documents of this many tokens
};

void run_case(const Case& c) {
  const int B = 1, H = 2;
  // Kernel choice: the process-wide overrides the tests use.
  ft::cuda::set_flash_wgmma_allowed(std::strcmp(c.path, "mma") != 0);
  ft::cuda::set_flash_fwd_small_tile_max_t(std::strcmp(c.path, "wgmma-large") == 0 ? 0 : -1);
  ft::cuda::set_flash_bwd_wide_min_t(std::strcmp(c.path, "wide") == 0 ? 0 : -1);
  // "wide" turns the warp-specialised backward off (it goes first from T = 1024); "ws" takes the
  // warp-specialised kernels everywhere: the backward, and the forward where it is built (no dropout,
  // no document mask; D = 64 in its 3-consumer form, D = 128 with the ping-pong: flash_fwd_ws_form).
  const bool stored = std::strcmp(c.path, "ws-stored") == 0, fixed = std::strcmp(c.path, "ws-fixed") == 0;
  const bool ordered = std::strcmp(c.path, "ws-ordered") == 0, walk = std::strcmp(c.path, "ws-walk") == 0;
  const bool ws = stored || fixed || ordered || walk || std::strcmp(c.path, "ws") == 0;
  ft::cuda::set_flash_fwd_ws_persistent(walk ? 1 : -1);
  ft::cuda::set_flash_fwd_ws_persistent_ctas_cap(walk ? 2 : 0);
  const ft::cuda::ScopedFlashDeterministicDq form(stored    ? ft::cuda::FlashDeterministicDq::kStoredDs
                                                  : fixed   ? ft::cuda::FlashDeterministicDq::kFixedPoint
                                                  : ordered ? ft::cuda::FlashDeterministicDq::kOrdered
                                                            : ft::cuda::flash_deterministic_dq());
  ft::cuda::set_flash_bwd_ws_min_t(ws ? 0 : std::strcmp(c.path, "wide") == 0 ? INT_MAX : -1);
  ft::cuda::set_flash_fwd_ws_min_t(ws ? 0 : -1);
  const int Hkv = c.kv_heads;
  // q, k, v as slices of one (B, T, H + 2 H_kv, D) buffer, as the model's projection lays them out.
  const Tensor qkv = random_cuda({B, c.T, H + 2 * Hkv, c.D}, 1 + c.T);
  const Tensor q = qkv.slice(2, 0, H), k = qkv.slice(2, H, H + Hkv), v = qkv.slice(2, H + Hkv, H + 2 * Hkv);
  ft::ops::AttentionOptions o;
  o.causal = c.causal;
  o.dropout_p = c.p;
  o.philox = {1234, 0};
  o.deterministic = c.deterministic;
  if (c.block_size) o.block_size = c.block_size, o.window_blocks = 2, o.global_blocks = 1;
  if (c.doc_len > 0) {
    std::vector<int32_t> starts(static_cast<size_t>(B) * c.T);
    for (int t = 0; t < c.T; ++t) starts[t] = t / c.doc_len * c.doc_len;
    o.doc_start = Tensor::from_vector(starts, {B, c.T}).to(Device::cuda());
  }
  const auto fwd = ft::ops::flash_attention_forward(q, k, v, o);
  const Tensor dout = random_cuda({B, c.T, H, c.D}, 7 + c.T);
  const Tensor dqkv = Tensor::zeros({B, c.T, H + 2 * Hkv, c.D}, DType::BF16, Device::cuda());
  ft::ops::flash_attention_backward(q, k, v, fwd.out, fwd.lse, dout, o, dqkv.slice(2, 0, H),
                                    dqkv.slice(2, H, H + Hkv), dqkv.slice(2, H + Hkv, H + 2 * Hkv));
  (void)dqkv.to(Device::cpu());  // synchronises: errors surface at this case
  std::printf("ok D=%d T=%d %s p=%.1f bs=%d %s %s kv_heads=%d doc_len=%d\n", c.D, c.T,
              c.causal ? "causal" : "full", c.p, c.block_size, c.deterministic ? "det" : "atomic", c.path,
              c.kv_heads, c.doc_len);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  std::vector<Case> cases;
  // T = 200: partial query and key tiles at every tile size (32, 64, 128).
  for (int D : {64, 128})
    for (bool causal : {true, false})
      for (float p : {0.f, 0.1f})
        for (bool det : {false, true}) {
          cases.push_back({D, 200, causal, p, 0, det, "default"});
          if (quick) continue;
          if (D == 64) {
            cases.push_back({D, 200, causal, p, 0, det, "mma"});
            cases.push_back({D, 200, causal, p, 0, det, "wgmma-large"});
            if (!det) cases.push_back({D, 200, causal, p, 0, det, "wide"});
            cases.push_back({D, 200, causal, p, 32, det, "ws"});
          }
          cases.push_back({D, 200, causal, p, 0, det, "ws"});  // deterministic: the ordered dQ (D = 64), the stored dS (128)
          if (det) cases.push_back({D, 200, causal, p, 0, det, "ws-stored"});
          if (det && D == 64) cases.push_back({D, 200, causal, p, 0, det, "ws-fixed"});
          if (det && D == 128) cases.push_back({D, 200, causal, p, 0, det, "ws-ordered"});
          if (p == 0.f && !det) cases.push_back({D, 1000, causal, p, 0, det, "ws-walk"});
          cases.push_back({D, 200, causal, p, 32, det, "default"});
        }
  if (quick) {
    cases.push_back({64, 200, true, 0.1f, 0, false, "wide"});
    cases.push_back({64, 200, true, 0.1f, 0, false, "ws"});
    cases.push_back({64, 200, true, 0.1f, 0, true, "ws"});         // the ordered dQ (kAuto at D = 64)
    cases.push_back({64, 1000, false, 0.f, 32, true, "ws"});       // ... 8 key blocks a head, block-sparse
    cases.push_back({64, 200, true, 0.1f, 0, true, "ws-fixed"});
    cases.push_back({128, 200, true, 0.1f, 0, false, "ws"});
    cases.push_back({128, 200, false, 0.f, 0, true, "ws"});  // the stored dS (kAuto at D = 128)
    cases.push_back({128, 200, true, 0.1f, 0, true, "ws-ordered"});    // D = 128's ordered dQ (dQ split by columns)
    cases.push_back({128, 1000, false, 0.f, 32, true, "ws-ordered"});  // ... 8 key blocks a head, block-sparse
    cases.push_back({64, 200, true, 0.1f, 32, true, "ws-stored"});  // block-sparse: tiles skipped by both kernels
    cases.push_back({64, 200, true, 0.f, 0, false, "ws"});     // the ws forward (no dropout)
    cases.push_back({128, 200, true, 0.f, 0, false, "ws"});
    cases.push_back({64, 1000, true, 0.f, 0, false, "ws-walk"});    // the persistent ws forward walking blocks
    cases.push_back({128, 1000, false, 0.f, 32, false, "ws-walk"});  // ... and skipping block-sparse tiles
  }
  for (float p : {0.f, 0.1f})
    for (bool det : {false, true}) {
      cases.push_back({256, 200, true, p, 0, det, "default"});
      Case gqa{64, 200, true, p, 0, det, "default"};
      gqa.kv_heads = 1;
      cases.push_back(gqa);
      gqa.path = "ws";
      cases.push_back(gqa);
      Case doc{64, 200, true, p, 0, det, "default"};
      doc.doc_len = 50;
      cases.push_back(doc);
      if (!det) {
        doc.path = "wide";
        cases.push_back(doc);
      }
    }
  for (const Case& c : cases) run_case(c);
  std::printf("%zu cases\n", cases.size());
  return 0;
}
