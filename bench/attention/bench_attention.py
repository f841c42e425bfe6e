"""Attention benchmark: flashtrain flash / naive against PyTorch SDPA (flash, cuDNN, math).

One process, one GPU, the same inputs for everyone: bf16, D=64, H=12 (--ds 64,128,256: also D=128 and
256 with H = 768 / D, so H*D stays GPT-2-small's 768), causal, B*T=32768,
T = 512 ... 16384, dropout 0 and 0.1. Times forward, backward and forward+backward (median of
CUDA-event timings after warm-up; --timing call, the default: one synchronised call per timing, so
host latency up to the first kernel counts; --timing stream: calls back to back, GPU time), counts forward FLOPs as 4*B*H*T^2*D (halved when causal) and
backward as 2.5x forward, and measures extra peak memory (torch's allocator peak over the inputs;
our kernels get every buffer from torch too: outputs, lse, workspaces, naive's T x T matrices).

Our kernels are loaded through ctypes from libft_attention.so (bench/attention/attention_capi.cu).
--doc-len N: the document mask instead (documents of N tokens, causal): flashtrain flash with the
mask against itself without it (dense causal), after a check against torch's math backend with
the same mask as an explicit boolean attn_mask.
Writes <out>/attention-<card>.json (rows {impl, T, B, H, H_kv, D, dropout, fwd_ms, bwd_ms,
fwdbwd_ms, fwd_tflops, fwdbwd_tflops, peak_mib}) and <out>/attention-<card>.md.
  python3 bench/attention/bench_attention.py --lib ./libft_attention.so --out DIR [--dev]

--kv-heads N: grouped-query attention, the 12 query heads sharing N K/V heads (N divides 12; 1 is
multi-query attention): our flash / naive (ft_attn_run_gqa) against PyTorch SDPA with
enable_gqa=True on whichever of its flash, cuDNN, efficient and math backends take it (a backend
that refuses leaves an error in its row). FLOPs count the query heads, as without GQA. Writes
<out>/attention-gqa<N>-<card>.{json,md}.
  python3 bench/attention/bench_attention.py --lib ./libft_attention.so --out DIR --kv-heads 4
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

H, D = 12, 64  # set per head dim by main (--ds): H = HIDDEN // D
HIDDEN = 768
TOKENS = 32768
KV_HEADS = None  # --kv-heads: grouped-query mode, K/V heads (None: multi-head attention)


def kv_heads():
    return KV_HEADS or H


class Flashtrain:
    """Our flash (impl 0) or naive (impl 1) attention through the C ABI (ft_attn_run_gqa in the
    grouped-query mode)."""

    def __init__(self, lib, impl, variant=0, doc_start=None):
        # doc_start: (B, T) int32 CUDA tensor of the document mask (ops/attention_params.h), or None
        self.lib, self.impl, self.variant, self.doc_start = lib, impl, variant, doc_start
        head = [ctypes.c_int] * 3 + [ctypes.c_void_p] * 11 + [ctypes.c_void_p]
        tail = [ctypes.c_int, ctypes.c_float, ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_int, ctypes.c_float]
        f = lib.ft_attn_run
        f.restype = ctypes.c_int
        f.argtypes = head + [ctypes.c_int] * 4 + [ctypes.c_void_p] + tail + [ctypes.c_void_p]
        if KV_HEADS:
            g = lib.ft_attn_run_gqa
            g.restype = ctypes.c_int
            g.argtypes = head + [ctypes.c_int] * 5 + [ctypes.c_void_p] + tail + [ctypes.c_void_p] * 2
        lib.ft_attn_last_error.restype = ctypes.c_char_p

    def setup(self, qkv, dout, causal, p):
        self.qkv, self.dout, self.causal, self.p = qkv, dout, causal, p
        self.B, self.T = qkv.shape[0], qkv.shape[1]
        s = qkv.stride()  # (B, T, 3, H, D), or (B, T, H + 2 H_kv, D) with --kv-heads
        self.strides = (ctypes.c_longlong * 3)(s[0], s[1], D)
        self.seed = 1234

    def _call(self, op, o, lse, dqkv=None, dsum=None, dq_accum=None, dkv_partial=None):
        qkv = self.qkv
        ptr = lambda t: ctypes.c_void_p(t.data_ptr()) if t is not None else None
        hd, kvd = H * D * qkv.element_size(), kv_heads() * D * qkv.element_size()
        base = qkv.data_ptr()
        dbase = dqkv.data_ptr() if dqkv is not None else 0
        bufs = (ctypes.c_void_p * 4)(*[b.data_ptr() if b is not None else 0 for b in self.naive])
        if hasattr(self.lib, "ft_attn_set_doc_start"):  # a --base-lib of an older commit may lack it
            self.lib.ft_attn_set_doc_start(ptr(self.doc_start))
        elif self.doc_start is not None:
            raise RuntimeError("this libft_attention.so has no document mask (ft_attn_set_doc_start)")
        args = [op, self.impl, self.variant, base, base + hd, base + hd + kvd, ptr(o), ptr(lse),
                ptr(self.dout), dbase or None, (dbase + hd) if dbase else None,
                (dbase + hd + kvd) if dbase else None, ptr(dsum), ptr(dq_accum), bufs]
        tail = [self.strides, int(self.causal), self.p, self.seed, 0, 0, 1.0 / math.sqrt(D)]
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        if KV_HEADS:
            rc = self.lib.ft_attn_run_gqa(*args, self.B, self.T, H, KV_HEADS, D, *tail, ptr(dkv_partial), stream)
        else:
            rc = self.lib.ft_attn_run(*args, self.B, self.T, H, D, *tail, stream)
        if rc != 0:
            raise RuntimeError(self.lib.ft_attn_last_error().decode())

    def forward(self):
        B, T = self.B, self.T
        o = torch.empty(B, T, H, D, dtype=self.qkv.dtype, device="cuda")
        lse = torch.empty(B, H, T, dtype=torch.float32, device="cuda")
        self.naive = [None] * 4
        if self.impl == 1:
            n = B * H * T * T
            self.naive = [torch.empty(n, dtype=torch.float32, device="cuda"),
                          torch.empty(n, dtype=self.qkv.dtype, device="cuda"),
                          torch.empty(n, dtype=self.qkv.dtype, device="cuda") if self.p > 0 else None,
                          None]
        self._call(0, o, lse)
        return (o, lse, self.naive)

    def backward(self, state):
        o, lse, naive = state
        self.naive = list(naive)
        B, T = self.B, self.T
        dqkv = torch.empty_like(self.qkv)
        dsum = dq_accum = None
        if self.impl == 0:
            dsum = torch.empty(B * H * T, dtype=torch.float32, device="cuda")
            # fp32 or fixed point, T rounded up to 128 rows (ops/cuda/attention/flash_dq_accum.cuh);
            # a --base-lib from before the fixed-point dQ lacks the size function
            if hasattr(self.lib, "ft_attn_dq_workspace_floats"):  # the stored dS's size where it runs
                f = self.lib.ft_attn_dq_workspace_floats
                f.restype = ctypes.c_longlong
                f.argtypes = [ctypes.c_int] * 5 + [ctypes.c_float, ctypes.c_int]
                n = f(B, T, H, D, int(self.causal), self.p, self.variant)
                if n < 0:
                    raise RuntimeError(self.lib.ft_attn_last_error().decode())
            elif hasattr(self.lib, "ft_attn_dq_accum_floats"):
                self.lib.ft_attn_dq_accum_floats.restype = ctypes.c_longlong
                n = self.lib.ft_attn_dq_accum_floats(B, T, H, D)
            else:
                n = B * H * ((T + 127) // 128) * 128 * D
            dq_accum = torch.empty(n, dtype=torch.float32, device="cuda")
        else:
            self.naive[3] = torch.empty(B * H * T * T, dtype=self.qkv.dtype, device="cuda")
        # grouped-query: per-query-head dK, dV before the group sum (as ops/attention.cpp allocates)
        dkv_partial = (torch.empty(2 * B * T * H * D, dtype=self.qkv.dtype, device="cuda")
                       if kv_heads() != H else None)
        self._call(1, o, lse, dqkv, dsum, dq_accum, dkv_partial)
        self.naive[3] = None
        return dqkv


class TorchSdpa:
    def __init__(self, backend):
        self.backend = backend

    def setup(self, qkv, dout, causal, p):
        self.q, self.k, self.v = [x.detach().transpose(1, 2).requires_grad_() for x in split_qkv(qkv)]
        self.dout = dout.transpose(1, 2)
        self.causal, self.p = causal, p

    def forward(self):
        # enable_gqa (torch >= 2.5) only where K/V have fewer heads, so the multi-head runs are
        # the calls they always were.
        gqa = {"enable_gqa": True} if kv_heads() != H else {}
        with sdpa_kernel(self.backend):
            return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=self.causal,
                                                  dropout_p=self.p, **gqa)

    def backward(self, out):
        return torch.autograd.grad(out, (self.q, self.k, self.v), self.dout, retain_graph=True)


BUDGET_MS = 200.0
# "call" (the default, as in every recorded run): one call between two events and a synchronisation
# after each, so each time also holds the host latency up to the call's first kernel. "stream": calls
# issued back to back between two events (median over blocks of calls), so a call's host work
# (Python, ctypes, torch's dispatch and autograd) overlaps the GPU work of the call before and the
# time is the GPU's. The two differ most for torch's backward alone, whose autograd host work is
# about 0.2 ms a call (bench/attention/NOTES.md, session 8).
TIMING = "call"


def time_ms(fn, budget_ms=None):
    budget_ms = budget_ms or BUDGET_MS
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    est = max(s.elapsed_time(e), 1e-3)
    reps = int(min(30, max(3, budget_ms / est)))
    for _ in range(min(3, reps)):
        fn()
    times = []
    if TIMING == "stream":
        per_block = max(2, reps // 5)
        torch.cuda.synchronize()
        for _ in range(5):
            s.record()
            for _ in range(per_block):
                fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / per_block)
        return statistics.median(times)
    for _ in range(reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def host_us(fn, n=20):
    """Host time of one call with the GPU idle before it (median over n calls), in microseconds."""
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def measure(impl, qkv, dout, causal, p):
    impl.setup(qkv, dout, causal, p)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    state = impl.forward()
    impl.backward(state)
    torch.cuda.synchronize()
    peak_mib = (torch.cuda.max_memory_allocated() - base) / 2**20
    bwd_ms = time_ms(lambda: impl.backward(state))
    del state  # before timing forwards, which allocate their own outputs (naive: T x T buffers)
    fwd_ms = time_ms(impl.forward)
    fwdbwd_ms = time_ms(lambda: impl.backward(impl.forward()))
    return fwd_ms, bwd_ms, fwdbwd_ms, peak_mib


IMPLS = {
    # A call that does not ask for determinism: the atomic dQ, or a deterministic form where the
    # library measured one faster (flash_backward_deterministic); _atomic forces the atomic dQ (67).
    "flashtrain_flash": lambda lib: Flashtrain(lib, 0),
    "flashtrain_flash_atomic": lambda lib: Flashtrain(lib, 0, 67),
    # The deterministic backward (what training uses by default): variant 4, whose dQ form the library
    # picks per call (flash_fixed_point_dq). Forced: the ordered dQ (29), the fixed-point dQ (30), the
    # fixed-point dQ on the wide tile at every T (31; D = 64 and 128).
    "flashtrain_flash_det": lambda lib: Flashtrain(lib, 0, 4),
    "flashtrain_flash_det_ordered": lambda lib: Flashtrain(lib, 0, 29),
    "flashtrain_flash_det_fixed": lambda lib: Flashtrain(lib, 0, 30),
    "flashtrain_flash_det_fixed_wide": lambda lib: Flashtrain(lib, 0, 31),
    # The stored dS (63): the backward writes dS, a second kernel forms dQ = dS K (flash_ds_store.cuh).
    "flashtrain_flash_det_stored": lambda lib: Flashtrain(lib, 0, 63),
    "flashtrain_naive": lambda lib: Flashtrain(lib, 1),
    "torch_flash": lambda lib: TorchSdpa(SDPBackend.FLASH_ATTENTION),
    "torch_cudnn": lambda lib: TorchSdpa(SDPBackend.CUDNN_ATTENTION),
    "torch_math": lambda lib: TorchSdpa(SDPBackend.MATH),
}


# The implementations the full benchmark re-measures with --rounds (the slow ones run once).
REPEATED_IMPLS = ("flashtrain_flash", "flashtrain_flash_atomic", "flashtrain_flash_det", "flashtrain_flash_det_ordered", "flashtrain_flash_det_fixed",
                  "flashtrain_flash_det_stored",
                  "torch_flash", "torch_cudnn")


def make_inputs(B, T, seed=0):
    """qkv (B, T, 3, H, D), or (B, T, H + 2 H_kv, D) with --kv-heads: q, k, v slices of one buffer
    as the model's projection lays them out; dout (B, T, H, D)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    shape = (B, T, 3, H, D) if kv_heads() == H else (B, T, H + 2 * kv_heads(), D)
    qkv = torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g)
    dout = torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
    return qkv, dout


def split_qkv(t):
    """q (B, T, H, D), k, v (B, T, H_kv, D) views of a make_inputs buffer (or of its gradient)."""
    if t.dim() == 5:
        return [t[:, :, i] for i in range(3)]
    return [t[:, :, :H], t[:, :, H:H + kv_heads()], t[:, :, H + kv_heads():]]


def sanity(lib):
    """Our flash vs torch flash / math on one shape (no dropout): relative differences."""
    qkv, dout = make_inputs(2, 1024, seed=1)
    res = {}
    for name in ("flashtrain_flash", "flashtrain_naive", "torch_flash", "torch_math"):
        impl = IMPLS[name](lib)
        impl.setup(qkv, dout, True, 0.0)
        out = impl.forward()
        grads = impl.backward(out)
        if isinstance(impl, Flashtrain):
            o = out[0].float()
            g = [x.float() for x in split_qkv(grads)]
        else:
            o = out.transpose(1, 2).float()
            g = [x.transpose(1, 2).float() for x in grads]
        res[name] = [o] + g
    ref = res["torch_math"]
    for name, vals in res.items():
        errs = [((a - b).norm() / b.norm()).item() for a, b in zip(vals, ref)]
        print(f"sanity {name:18s} vs torch_math rel diff o/dq/dk/dv: " +
              " ".join(f"{e:.2e}" for e in errs))


def check_variants(lib, variants, shapes=((4, 1024, True), (3, 1000, True), (3, 1000, False), (5, 17, True))):
    """Each flash variant against variant 0 (same inputs, same dropout mask): relative differences
    of o, dq, dk, dv over (B, T, causal) shapes that include partial tiles. Prints OK below 1e-2
    (bf16 rounding; a wrong layout gives O(1))."""
    for B, T, causal in shapes:
        qkv, dout = make_inputs(B, T, seed=2)
        for p in (0.0, 0.1):
            res = {}
            for v in [0] + [v for v in variants if v != 0]:
                impl = Flashtrain(lib, 0, v)
                impl.setup(qkv, dout, causal, p)
                o, lse, naive = impl.forward()
                g = impl.backward((o, lse, naive))
                res[v] = [o.float(), g[:, :, 0].float(), g[:, :, 1].float(), g[:, :, 2].float()]
            for v, vals in res.items():
                if v == 0:
                    continue
                errs = [((a - b).norm() / b.norm()).item() for a, b in zip(vals, res[0])]
                ok = all(e < 1e-2 for e in errs)  # NaN fails too
                print(f"check variant={v} B={B} T={T} causal={causal} p={p} vs 0: o/dq/dk/dv rel diff " +
                      " ".join(f"{e:.2e}" for e in errs) + (" OK" if ok else " FAIL"), flush=True)


def doc_starts(B, T, doc_len):
    """(B, T) int32: documents of doc_len tokens, each row cut at the same places."""
    row = (torch.arange(T, device="cuda", dtype=torch.int32) // doc_len) * doc_len
    return row.expand(B, T).contiguous()


def doc_mode(lib, args):
    """--doc-len: flashtrain flash with the document mask against torch math with the same mask (one
    shape), then timed against dense causal (the tile skipping should make it faster)."""
    N = args.doc_len
    qkv, dout = make_inputs(2, 4 * N + N // 2 + 3, seed=3)  # documents cut inside tiles, a partial last one
    B, T = qkv.shape[0], qkv.shape[1]
    ds = doc_starts(B, T, N)
    pos = torch.arange(T, device="cuda")
    mask = (pos[None, :] <= pos[:, None]) & (pos[None, :] >= ds[0][:, None].long())  # (T, T): query row, key col
    ours = Flashtrain(lib, 0, 0, ds)
    ours.setup(qkv, dout, True, 0.0)
    o, lse, naive = ours.forward()
    g = ours.backward((o, lse, naive))
    ref = TorchSdpa(SDPBackend.MATH)
    ref.setup(qkv, dout, True, 0.0)
    with sdpa_kernel(SDPBackend.MATH):
        ro = F.scaled_dot_product_attention(ref.q, ref.k, ref.v, attn_mask=mask)
    rg = torch.autograd.grad(ro, (ref.q, ref.k, ref.v), ref.dout)
    errs = [((a.float() - b.float()).norm() / b.float().norm()).item()
            for a, b in zip([o] + [g[:, :, i] for i in range(3)], [ro.transpose(1, 2)] + [x.transpose(1, 2) for x in rg])]
    print(f"doc check T={T} doc_len={N} vs torch math with the mask: o/dq/dk/dv rel diff " +
          " ".join(f"{e:.2e}" for e in errs) + (" OK" if all(e < 2e-2 for e in errs) else " FAIL"), flush=True)
    rows = []
    for T in [int(t) for t in args.ts.split(",")]:
        B = TOKENS // T
        qkv, dout = make_inputs(B, T)
        ds = doc_starts(B, T, N)
        for p in (0.0, 0.1):
            for name, impl in (("flashtrain_flash", Flashtrain(lib, 0)),
                               ("flashtrain_flash_doc", Flashtrain(lib, 0, 0, ds)),
                               ("flashtrain_flash_det_doc", Flashtrain(lib, 0, 4, ds))):
                f, b, fb, peak = measure(impl, qkv, dout, True, p)
                rows.append({"impl": name, "T": T, "B": B, "dropout": p, "doc_len": N if "doc" in name else None,
                             "fwd_ms": f, "bwd_ms": b, "fwdbwd_ms": fb, "peak_mib": peak})
                print(f"T={T:5d} B={B:2d} p={p} doc_len={N} {name:25s} fwd {f:.3f} ms bwd {b:.3f} ms "
                      f"fwdbwd {fb:.3f} ms peak {peak:.0f} MiB", flush=True)
        del qkv, dout
        torch.cuda.empty_cache()
    card = torch.cuda.get_device_name().replace("NVIDIA ", "").split()[0].lower()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"attention-doc{N}-{card}.json"), "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": args.date,
                   "commit": args.commit, "rows": rows}, fh, indent=1)


def write_outputs(args, card, rows, quiet=True):
    os.makedirs(args.out, exist_ok=True)
    stem = f"attention-{card}" if not KV_HEADS else f"attention-gqa{KV_HEADS}-{card}"
    with open(os.path.join(args.out, f"{stem}.json"), "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "date": args.date, "commit": args.commit, "rows": rows}, fh, indent=1)
    lines = [f"# Attention benchmark on {torch.cuda.get_device_name()} (torch {torch.__version__})",
             "", f"Date {args.date}, commit {args.commit}. flashtrain_flash is a call that does not ask for "
             "determinism: the atomic dQ, or a deterministic form where the library measured one faster "
             "(flash_backward_deterministic: at D = 128 the stored dS where it fits and the ordered dQ beyond it "
             "with dropout; at D = 64 the ordered dQ with dropout up to T = 2048); _atomic forces the atomic dQ. "
             "flashtrain_flash_det is our deterministic "
             "backward (bit-identical dq; what training uses by default), whose dQ form the library picks per call: "
             "_det_fixed forces the fixed-point dQ adds, _det_ordered the ordered form (counters with dropout, "
             "a separate dQ kernel without), _det_stored the stored dS (dS written, then dQ = dS K in a second "
             "kernel; the default at D = 128 up to a 1 GiB workspace). "
             f"{REPEATED_IMPLS} measured in {args.rounds} interleaved round(s), median. Timing: {args.timing} "
             "(call: one synchronised call per timing, host latency to the first kernel included; stream: "
             "calls back to back, GPU time).", "", f"bf16, H*D={HIDDEN} (D, H per row), H_kv={KV_HEADS or 'H'}, causal, B*T={TOKENS}. "
             "TF = TFLOP/s (fwd 4BHT^2D/2, bwd 2.5x). "
             "Ratios = fwd+bwd time of torch_flash (torch_cudnn) / this row's (>1: this row is faster).", "",
             "| D | H | T | p | impl | fwd ms | bwd ms | fwd+bwd ms | fwd TF | fwd+bwd TF | peak MiB | vs torch_flash | vs torch_cudnn |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    def ratio_to(r, impl):
        ref = next((x for x in rows if x["impl"] == impl and x["T"] == r["T"] and x["D"] == r["D"]
                    and x["dropout"] == r["dropout"]), None)
        return (ref["fwdbwd_ms"] / r["fwdbwd_ms"]) if ref and ref["fwdbwd_ms"] and r["fwdbwd_ms"] else None
    for r in rows:
        lines.append(f"| {r['D']} | {r['H']} | {r['T']} | {r['dropout']} | {r['impl']} | {fmt(r['fwd_ms'], '.3f')} | "
                     f"{fmt(r['bwd_ms'], '.3f')} | {fmt(r['fwdbwd_ms'], '.3f')} | "
                     f"{fmt(r['fwd_tflops'], '.0f')} | {fmt(r['fwdbwd_tflops'], '.0f')} | "
                     f"{fmt(r['peak_mib'], '.0f')} | {fmt(ratio_to(r, 'torch_flash'), '.2f')} | "
                     f"{fmt(ratio_to(r, 'torch_cudnn'), '.2f')} |")
    with open(os.path.join(args.out, f"{stem}.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    if not quiet:
        print("\n".join(lines))



def fmt(x, spec):
    return format(x, spec) if x is not None else "-"


def main():
    global BUDGET_MS, TIMING, H, D, KV_HEADS
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dev", action="store_true", help="time flash tile variants only")
    ap.add_argument("--ts", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--ds", default="64", help=f"head dims, each with H = {HIDDEN} / D, so H*D (and B*T, the "
                    "FLOPs) stay those of D = 64 (e.g. 64,128,256); the sanity check, --dev and --doc-len take "
                    "the first")
    ap.add_argument("--impls", default=None, help="comma-separated (default: all of IMPLS)")
    ap.add_argument("--variants", default="0,4", help="--dev: flash variants (attention_capi.cu)")
    ap.add_argument("--dev-ts", default=None, help="--dev: sequence lengths (default 1024,4096)")
    ap.add_argument("--dev-refs", default="torch_flash,torch_cudnn", help="--dev: torch backends")
    ap.add_argument("--commit", default=os.environ.get("FT_COMMIT", "unknown"),
                    help="the source version measured (recorded in the outputs)")
    ap.add_argument("--budget-ms", type=float, default=BUDGET_MS, help="timing budget per measurement")
    ap.add_argument("--timing", choices=("stream", "call"), default=TIMING,
                    help="stream: calls back to back (GPU time); call: a synchronisation after every call")
    ap.add_argument("--host", action="store_true", help="--dev: also the host time per call")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure the flash implementations (REPEATED_IMPLS) this many times, interleaved, "
                         "and report the median of each metric")
    ap.add_argument("--base-lib", default=None,
                    help="--dev: a second build (e.g. of the previous commit) timed in the same process "
                         "as the refs base_flash and base_flash_det (and base_v<N> for each --base-variants N)")
    ap.add_argument("--base-variants", default="",
                    help="--dev with --base-lib: more of the base build's variants, as refs base_v<N>")
    ap.add_argument("--kv-heads", type=int, default=0,
                    help="grouped-query attention: K/V heads shared by the H = 768 / D query heads (a divisor of H)")
    ap.add_argument("--doc-len", type=int, default=0,
                    help="time the document mask with documents of this many tokens (see the top)")
    args = ap.parse_args()
    head_dims = [int(x) for x in args.ds.split(",")]
    if any(d not in (64, 128, 256) for d in head_dims):
        ap.error(f"--ds {args.ds}: head dims are 64, 128 or 256")
    if args.kv_heads:
        for d in head_dims:
            if (HIDDEN // d) % args.kv_heads != 0:
                ap.error(f"--kv-heads {args.kv_heads} does not divide H = {HIDDEN // d} (D = {d})")
        if args.dev:
            ap.error("--kv-heads times the shipped kernels only (no --dev)")
        KV_HEADS = args.kv_heads
        IMPLS["torch_efficient"] = lambda lib: TorchSdpa(SDPBackend.EFFICIENT_ATTENTION)
    args.impls = args.impls or ",".join(IMPLS)
    if args.base_lib:
        base = ctypes.CDLL(os.path.abspath(args.base_lib))
        IMPLS["base_flash"] = lambda lib: Flashtrain(base, 0)
        IMPLS["base_flash_det"] = lambda lib: Flashtrain(base, 0, 4)
        for v in (int(x) for x in args.base_variants.split(",") if x):
            IMPLS[f"base_v{v}"] = lambda lib, v=v: Flashtrain(base, 0, v)
    BUDGET_MS, TIMING = args.budget_ms, args.timing
    D, H = head_dims[0], HIDDEN // head_dims[0]
    args.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    card = torch.cuda.get_device_name().replace("NVIDIA ", "").split()[0].lower()
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__, f"D={D} H={H}", flush=True)
    sanity(lib)

    if args.doc_len > 0:
        doc_mode(lib, args)
        return
    if args.dev:
        check_variants(lib, [int(v) for v in args.variants.split(",")])
        for T in [int(t) for t in (args.dev_ts or "1024,4096").split(",")]:
            B = TOKENS // T
            qkv, dout = make_inputs(B, T)
            fl = 4 * B * H * T * T * D / 2
            for p in (0.0, 0.1):
                for variant in [int(v) for v in args.variants.split(",")]:
                    f, b, fb, _ = measure(Flashtrain(lib, 0, variant), qkv, dout, True, p)
                    print(f"dev T={T} p={p} variant={variant}: fwd {f:.3f} ms ({fl/f/1e9:.0f} TF) "
                          f"bwd {b:.3f} ms ({2.5*fl/b/1e9:.0f} TF) fwdbwd {fb:.3f} ms "
                          f"({3.5*fl/fb/1e9:.0f} TF)", flush=True)
                for name in [n for n in args.dev_refs.split(",") if n]:
                    impl = IMPLS[name](lib)
                    f, b, fb, _ = measure(impl, qkv, dout, True, p)
                    print(f"dev T={T} p={p} {name}: fwd {f:.3f} ms ({fl/f/1e9:.0f} TF) "
                          f"bwd {b:.3f} ms ({2.5*fl/b/1e9:.0f} TF) fwdbwd {fb:.3f} ms "
                          f"({3.5*fl/fb/1e9:.0f} TF)", flush=True)
                if args.host:  # host time per call, ours (variant 0) and the refs
                    for name, impl in [("flashtrain_flash", Flashtrain(lib, 0))] + [
                            (n, IMPLS[n](lib)) for n in args.dev_refs.split(",") if n]:
                        impl.setup(qkv, dout, True, p)
                        print(f"host T={T} p={p} {name}: fwd {host_us(impl.forward):.0f} us, fwd+bwd "
                              f"{host_us(lambda: impl.backward(impl.forward())):.0f} us", flush=True)
        return

    rows = []
    for T, D_ in [(int(t), d) for d in head_dims for t in args.ts.split(",")]:
        D, H = D_, HIDDEN // D_
        B = TOKENS // T
        qkv, dout = make_inputs(B, T)
        fl = 4 * B * H * T * T * D / 2
        for p in (0.0, 0.1):
            names = args.impls.split(",")
            runs = {name: [] for name in names}
            errors = {}
            # Round r > 0 re-measures the fast implementations, interleaved with each other, so a
            # clock drift during the run moves all of them alike; each metric is the median over rounds.
            for r in range(args.rounds):
                for name in names:
                    if name in errors or (r > 0 and name not in REPEATED_IMPLS):
                        continue
                    try:
                        runs[name].append(measure(IMPLS[name](lib), qkv, dout, True, p))
                    except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
                        errors[name] = str(e).splitlines()[0][:200]
                    torch.cuda.empty_cache()
            for name in names:
                row = {"impl": name, "T": T, "B": B, "H": H, "H_kv": kv_heads(), "D": D, "dropout": p,
                       "fwd_ms": None, "bwd_ms": None,
                       "fwdbwd_ms": None, "fwd_tflops": None, "fwdbwd_tflops": None,
                       "peak_mib": None}
                if runs[name]:
                    f, b, fb = (statistics.median(m[i] for m in runs[name]) for i in range(3))
                    row.update(fwd_ms=f, bwd_ms=b, fwdbwd_ms=fb, fwd_tflops=fl / f / 1e9,
                               fwdbwd_tflops=3.5 * fl / fb / 1e9, peak_mib=runs[name][0][3])
                if name in errors:
                    row["error"] = errors[name]
                rows.append(row)
                print(f"D={D} T={T:5d} B={B:2d} p={p} {name:17s} fwd {fmt(row['fwd_ms'], '.3f')} ms "
                      f"bwd {fmt(row['bwd_ms'], '.3f')} fwdbwd {fmt(row['fwdbwd_ms'], '.3f')} ms "
                      f"{fmt(row['fwdbwd_tflops'], '.0f')} TF peak {fmt(row['peak_mib'], '.0f')} MiB "
                      f"({len(runs[name])} rounds) {row.get('error', '')}", flush=True)
            write_outputs(args, card, rows)
        del qkv, dout
        torch.cuda.empty_cache()
    write_outputs(args, card, rows, quiet=False)



if __name__ == "__main__":
    main()
