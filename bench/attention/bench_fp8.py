"""FP8 attention benchmark: flashtrain's FP8 forward (per-tensor, per-tile, per-tile + Hadamard) and its
bf16 flash forward, on FlashAttention-3's outlier inputs, timed and checked against float64.

Inputs (the same for every impl): q, k, v ~ N(0, 1) + N(0, 100) * Bernoulli(0.001), bf16, (B, T, H, D) slices
of one (B, T, 3, H, D) buffer, B * T = 16384 tokens, H * D = 2048 (FA3's setup), non-causal and causal.
RMSE of each output against attention computed in torch float64 on the GPU (head by head).
fwd_ms is the attention kernel alone (the quantised operands already made: FA3 times the kernel the
same way); quant_ms is the quantisation of q, k and v; fwd_tflops counts 4 B H T^2 D (halved causal)
over fwd_ms. bf16 is our flash forward (D = 64, 128 and 256).
Writes <out>/attention-fp8-<card>.json (rows {impl, D, T, causal, rmse, fwd_ms, quant_ms, fwd_tflops})
and <out>/attention-fp8-<card>.md.
  python3 bench/attention/bench_fp8.py --lib build/bench/attention/libft_attention.so --out bench/results
The FP8 forward's schedule is the fastest per head dim unless the dev-only FLASHTRAIN_FP8_FWD_VARIANT
picks one (default, plain, pipe, wg1occ4, wg1occ3; ops/cuda/attention/flash_fp8.h; a variant that does not
fit a head dim runs plain); when set, it is recorded and the output files are named attention-fp8-<card>-<variant>.*. --impls picks rows, e.g.
  FLASHTRAIN_FP8_FWD_VARIANT=pipe python3 bench/attention/bench_fp8.py --lib ... --out /tmp/v \
      --ts 4096 --causal 0 --impls bf16,fp8_block_hadamard
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_attention import time_ms  # noqa: E402  (median of CUDA-event timings after warm-up)

TOKENS, WIDTH = 16384, 2048
IMPLS = ("fp8_per_tensor", "fp8_block", "fp8_block_hadamard", "bf16")
FP8_MODE = {"fp8_per_tensor": 0, "fp8_block": 1, "fp8_block_hadamard": 2}


def outlier_qkv(B, T, H, D, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(B, T, 3, H, D, device="cuda", dtype=torch.float32, generator=g)
    mask = torch.rand(B, T, 3, H, D, device="cuda", generator=g) < 0.001
    x = x + mask * 10.0 * torch.randn(B, T, 3, H, D, device="cuda", dtype=torch.float32, generator=g)
    return x.to(torch.bfloat16)


def exact_attention(qkv, causal):
    """float64 attention, (B, T, H, D), one (batch, head) at a time (T x T float64 per head)."""
    B, T, _, H, D = qkv.shape
    out = torch.empty(B, T, H, D, dtype=torch.float64, device="cuda")
    mask = torch.ones(T, T, dtype=torch.bool, device="cuda").tril() if causal else None
    for b in range(B):
        for h in range(H):
            q, k, v = (qkv[b, :, i, h].double() for i in range(3))
            s = (q @ k.T) / math.sqrt(D)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            out[b, :, h] = torch.softmax(s, dim=-1) @ v
    return out


class Lib:
    def __init__(self, path):
        self.lib = ctypes.CDLL(os.path.abspath(path))
        self.lib.ft_attn_last_error.restype = ctypes.c_char_p
        f = self.lib.ft_attn_fp8_run
        f.restype = ctypes.c_int
        f.argtypes = ([ctypes.c_int] * 2 + [ctypes.c_void_p] * 11 + [ctypes.c_int] * 4 +
                      [ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_ulonglong, ctypes.c_void_p])
        g = self.lib.ft_attn_run
        g.restype = ctypes.c_int
        g.argtypes = ([ctypes.c_int] * 3 + [ctypes.c_void_p] * 11 + [ctypes.c_void_p] +
                      [ctypes.c_int] * 4 + [ctypes.c_void_p] +
                      [ctypes.c_int, ctypes.c_float, ctypes.c_ulonglong, ctypes.c_ulonglong,
                       ctypes.c_int, ctypes.c_float, ctypes.c_void_p])

    def check(self, rc):
        if rc != 0:
            raise RuntimeError(self.lib.ft_attn_last_error().decode())


class Fp8:
    def __init__(self, lib, qkv, causal, mode):
        self.lib, self.qkv, self.causal, self.mode = lib, qkv, causal, mode
        B, T, _, H, D = qkv.shape
        self.dims = (B, T, H, D)
        sizes = (ctypes.c_longlong * 6)()
        lib.lib.ft_attn_fp8_sizes(B, T, H, D, sizes)
        self.bytes = [torch.empty(sizes[i], dtype=torch.uint8, device="cuda") for i in range(3)]
        self.scales = [torch.empty(sizes[3 + i], dtype=torch.float32, device="cuda") for i in range(3)]
        self.amax = torch.empty(1, dtype=torch.float32, device="cuda")
        self.out = torch.empty(B, T, H, D, dtype=torch.bfloat16, device="cuda")
        s = qkv.stride()
        self.strides = (ctypes.c_longlong * 3)(s[0], s[1], s[3])

    def run(self, phase):
        B, T, H, D = self.dims
        hd = H * D * 2
        base = self.qkv.data_ptr()
        p = lambda t: ctypes.c_void_p(t.data_ptr())
        self.lib.check(self.lib.lib.ft_attn_fp8_run(
            phase, self.mode, base, base + hd, base + 2 * hd, p(self.out), *map(p, self.bytes),
            *map(p, self.scales), p(self.amax), B, T, H, D, self.strides, int(self.causal),
            1.0 / math.sqrt(D), 1234, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))


class Bf16Flash:
    def __init__(self, lib, qkv, causal):
        self.lib, self.qkv, self.causal = lib, qkv, causal
        B, T, _, H, D = qkv.shape
        self.dims = (B, T, H, D)
        self.out = torch.empty(B, T, H, D, dtype=torch.bfloat16, device="cuda")
        self.lse = torch.empty(B, H, T, dtype=torch.float32, device="cuda")
        s = qkv.stride()
        self.strides = (ctypes.c_longlong * 3)(s[0], s[1], s[3])
        self.bufs = (ctypes.c_void_p * 4)(0, 0, 0, 0)

    def run(self):
        B, T, H, D = self.dims
        hd = H * D * 2
        base = self.qkv.data_ptr()
        self.lib.check(self.lib.lib.ft_attn_run(
            0, 0, 0, base, base + hd, base + 2 * hd, ctypes.c_void_p(self.out.data_ptr()),
            ctypes.c_void_p(self.lse.data_ptr()), None, None, None, None, None, None, self.bufs,
            B, T, H, D, self.strides, int(self.causal), 0.0, 0, 0, 0, 1.0 / math.sqrt(D),
            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ts", default="1024,4096,8192")
    ap.add_argument("--ds", default="64,128,256")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--impls", default=",".join(IMPLS), help="comma-separated subset of " + ", ".join(IMPLS))
    ap.add_argument("--commit", default=os.environ.get("FT_COMMIT", "unknown"))
    args = ap.parse_args()
    impls = args.impls.split(",")
    unknown = [i for i in impls if i not in IMPLS]
    if unknown:
        ap.error(f"--impls: unknown {', '.join(unknown)} (known: {', '.join(IMPLS)})")
    variant = os.environ.get("FLASHTRAIN_FP8_FWD_VARIANT", "")
    lib = Lib(args.lib)
    name = torch.cuda.get_device_name()
    card = name.replace("NVIDIA ", "").split()[0].lower()
    print("device:", name, "torch", torch.__version__, "fp8 forward variant:", variant or "default", flush=True)
    rows = []
    for D in [int(d) for d in args.ds.split(",")]:
        for T in [int(t) for t in args.ts.split(",")]:
            B, H = max(1, TOKENS // T), WIDTH // D
            qkv = outlier_qkv(B, T, H, D, seed=T + D)
            for causal in [bool(int(c)) for c in args.causal.split(",")]:
                exact = exact_attention(qkv, causal)
                flops = 4 * B * H * T * T * D / (2 if causal else 1)
                for impl in impls:
                    row = {"impl": impl, "D": D, "T": T, "B": B, "H": H, "causal": causal, "rmse": None,
                           "fwd_ms": None, "quant_ms": None, "fwd_tflops": None}
                    try:
                        if impl == "bf16":
                            k = Bf16Flash(lib, qkv, causal)
                            k.run()
                            out = k.out
                            row["fwd_ms"] = time_ms(k.run)
                        else:
                            k = Fp8(lib, qkv, causal, FP8_MODE[impl])
                            k.run(3)
                            out = k.out
                            row["quant_ms"] = time_ms(lambda: k.run(1))
                            row["fwd_ms"] = time_ms(lambda: k.run(2))
                        torch.cuda.synchronize()
                        row["rmse"] = (out.double() - exact).pow(2).mean().sqrt().item()
                        row["fwd_tflops"] = flops / row["fwd_ms"] / 1e9
                    except RuntimeError as e:
                        row["error"] = str(e).splitlines()[0][:200]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                del exact
            del qkv
            torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    stem = f"attention-fp8-{card}" + (f"-{variant}" if variant else "")
    with open(os.path.join(args.out, stem + ".json"), "w") as fh:
        json.dump({"device": name, "torch": torch.__version__, "date": date, "commit": args.commit,
                   "fp8_fwd_variant": variant or "default", "rows": rows}, fh, indent=1)
    fmt = lambda x, spec: format(x, spec) if x is not None else "-"
    lines = [f"# FP8 attention forward on {name}", "",
             f"Date {date}, commit {args.commit}, FP8 forward variant {variant or 'default'}. FA3's outlier inputs (N(0,1) + N(0,100) Bernoulli(0.001)), "
             f"B*T = {TOKENS}, H*D = {WIDTH}. RMSE against float64 attention. fwd ms: the attention kernel "
             "(operands already quantised); quant ms: quantising q, k, v. TF: 4BHT^2D (halved causal) / fwd ms.",
             "", "| D | T | causal | impl | rmse | fwd ms | quant ms | fwd TF |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['D']} | {r['T']} | {int(r['causal'])} | {r['impl']} | {fmt(r['rmse'], '.2e')} | "
                     f"{fmt(r['fwd_ms'], '.3f')} | {fmt(r['quant_ms'], '.3f')} | {fmt(r['fwd_tflops'], '.0f')} |"
                     + (f" {r['error']}" if "error" in r else ""))
    with open(os.path.join(args.out, stem + ".md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
