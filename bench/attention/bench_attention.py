"""Attention benchmark: flashtrain flash / naive against PyTorch SDPA (flash, cuDNN, math).

One process, one GPU, the same inputs for everyone: bf16, D=64, H=12, causal, B*T=32768 (--d 128 or
256: H = 768 / D, so H*D = 768 and the tokens, the bytes of q, k, v and the FLOPs stay those of D=64),
T = 512 ... 16384, dropout 0 and 0.1. Times forward, backward and forward+backward (median of
CUDA-event timings after warm-up; --timing call, the default: one synchronised call per timing, so
host latency up to the first kernel counts; --timing stream: calls back to back, GPU time), counts forward FLOPs as 4*B*H*T^2*D (halved when causal) and
backward as 2.5x forward, and measures extra peak memory (torch's allocator peak over the inputs;
our kernels get every buffer from torch too: outputs, lse, workspaces, naive's T x T matrices).

Our kernels are loaded through ctypes from libft_attention.so (bench/attention/attention_capi.cu).
Writes <out>/attention-<card>.json (rows {impl, T, B, H, D, dropout, fwd_ms, bwd_ms, fwdbwd_ms,
fwd_tflops, fwdbwd_tflops, peak_mib}) and <out>/attention-<card>.md (attention-<card>-d<D>.* for
D != 64).
  python3 bench/attention/bench_attention.py --lib ./libft_attention.so --out DIR [--dev] [--d 256]
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

H, D = 12, 64  # --d sets D and H = HD / D
HD = 768  # H * D, as GPT-2 small's d_model
TOKENS = 32768


class Flashtrain:
    """Our flash (impl 0) or naive (impl 1) attention through the C ABI."""

    def __init__(self, lib, impl, variant=0):
        self.lib, self.impl, self.variant = lib, impl, variant
        f = lib.ft_attn_run
        f.restype = ctypes.c_int
        f.argtypes = ([ctypes.c_int] * 3 + [ctypes.c_void_p] * 11 + [ctypes.c_void_p] +
                      [ctypes.c_int] * 4 + [ctypes.c_void_p] +
                      [ctypes.c_int, ctypes.c_float, ctypes.c_ulonglong, ctypes.c_ulonglong,
                       ctypes.c_int, ctypes.c_float, ctypes.c_void_p])
        lib.ft_attn_last_error.restype = ctypes.c_char_p

    def setup(self, qkv, dout, causal, p):
        self.qkv, self.dout, self.causal, self.p = qkv, dout, causal, p
        self.B, self.T = qkv.shape[0], qkv.shape[1]
        s = qkv.stride()  # (B, T, 3, H, D)
        self.strides = (ctypes.c_longlong * 3)(s[0], s[1], s[3])
        self.seed = 1234

    def _call(self, op, o, lse, dqkv=None, dsum=None, dq_accum=None):
        qkv = self.qkv
        ptr = lambda t: ctypes.c_void_p(t.data_ptr()) if t is not None else None
        hd = H * D * qkv.element_size()
        base = qkv.data_ptr()
        dbase = dqkv.data_ptr() if dqkv is not None else 0
        bufs = (ctypes.c_void_p * 4)(*[b.data_ptr() if b is not None else 0 for b in self.naive])
        rc = self.lib.ft_attn_run(
            op, self.impl, self.variant, base, base + hd, base + 2 * hd, ptr(o), ptr(lse),
            ptr(self.dout), dbase or None, (dbase + hd) if dbase else None,
            (dbase + 2 * hd) if dbase else None, ptr(dsum), ptr(dq_accum), bufs,
            self.B, self.T, H, D, self.strides, int(self.causal), self.p, self.seed, 0, 0,
            1.0 / math.sqrt(D), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
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
            # T rounded up to 128 rows (ops/cuda/attention/flash_dq_accum.cuh)
            dq_accum = torch.empty(B * H * ((T + 127) // 128) * 128 * D, dtype=torch.float32, device="cuda")
        else:
            self.naive[3] = torch.empty(B * H * T * T, dtype=self.qkv.dtype, device="cuda")
        self._call(1, o, lse, dqkv, dsum, dq_accum)
        self.naive[3] = None
        return dqkv


class TorchSdpa:
    def __init__(self, backend):
        self.backend = backend

    def setup(self, qkv, dout, causal, p):
        self.q, self.k, self.v = [qkv[:, :, i].detach().transpose(1, 2).requires_grad_() for i in range(3)]
        self.dout = dout.transpose(1, 2)
        self.causal, self.p = causal, p

    def forward(self):
        with sdpa_kernel(self.backend):
            return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=self.causal,
                                                  dropout_p=self.p)

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
    "flashtrain_flash": lambda lib: Flashtrain(lib, 0),
    # The deterministic backward (fixed dQ order; what training uses by default): variant 4.
    "flashtrain_flash_det": lambda lib: Flashtrain(lib, 0, 4),
    "flashtrain_naive": lambda lib: Flashtrain(lib, 1),
    "torch_flash": lambda lib: TorchSdpa(SDPBackend.FLASH_ATTENTION),
    "torch_cudnn": lambda lib: TorchSdpa(SDPBackend.CUDNN_ATTENTION),
    "torch_math": lambda lib: TorchSdpa(SDPBackend.MATH),
}


# The implementations the full benchmark re-measures with --rounds (the slow ones run once).
REPEATED_IMPLS = ("flashtrain_flash", "flashtrain_flash_det", "torch_flash", "torch_cudnn")


def make_inputs(B, T, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    qkv = torch.randn(B, T, 3, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
    dout = torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
    return qkv, dout


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
            g = [grads[:, :, i].float() for i in range(3)]
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


def write_outputs(args, card, rows, quiet=True):
    os.makedirs(args.out, exist_ok=True)
    stem = f"attention-{card}" + ("" if D == 64 else f"-d{D}")
    with open(os.path.join(args.out, f"{stem}.json"), "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "date": args.date, "commit": args.commit, "rows": rows}, fh, indent=1)
    lines = [f"# Attention benchmark on {torch.cuda.get_device_name()} (torch {torch.__version__})",
             "", f"Date {args.date}, commit {args.commit}. flashtrain_flash_det is our deterministic "
             "backward (bit-identical dq; what training uses by default). "
             f"{REPEATED_IMPLS} measured in {args.rounds} interleaved round(s), median. Timing: {args.timing} "
             "(call: one synchronised call per timing, host latency to the first kernel included; stream: "
             "calls back to back, GPU time).", "", f"bf16, D={D}, H={H}, causal, B*T={TOKENS}. TF = TFLOP/s (fwd 4BHT^2D/2, bwd 2.5x). "
             "Ratio = fwd+bwd time of torch_flash / ours (>1: we are faster).", "",
             "| T | p | impl | fwd ms | bwd ms | fwd+bwd ms | fwd TF | fwd+bwd TF | peak MiB | vs torch_flash |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ref = next((x for x in rows if x["impl"] == "torch_flash" and x["T"] == r["T"]
                    and x["dropout"] == r["dropout"]), None)
        ratio = (ref["fwdbwd_ms"] / r["fwdbwd_ms"]) if ref and ref["fwdbwd_ms"] and r["fwdbwd_ms"] else None
        lines.append(f"| {r['T']} | {r['dropout']} | {r['impl']} | {fmt(r['fwd_ms'], '.3f')} | "
                     f"{fmt(r['bwd_ms'], '.3f')} | {fmt(r['fwdbwd_ms'], '.3f')} | "
                     f"{fmt(r['fwd_tflops'], '.0f')} | {fmt(r['fwdbwd_tflops'], '.0f')} | "
                     f"{fmt(r['peak_mib'], '.0f')} | {fmt(ratio, '.2f')} |")
    with open(os.path.join(args.out, f"{stem}.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    if not quiet:
        print("\n".join(lines))



def fmt(x, spec):
    return format(x, spec) if x is not None else "-"


def main():
    global BUDGET_MS, TIMING, H, D
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, choices=(64, 128, 256), default=64,
                    help="head dim D; H = 768 / D heads, so H*D (and B*T, the FLOPs) stay those of D=64")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dev", action="store_true", help="time flash tile variants only")
    ap.add_argument("--ts", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--impls", default=",".join(IMPLS))
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
                         "as the refs base_flash and base_flash_det")
    args = ap.parse_args()
    if args.base_lib:
        base = ctypes.CDLL(os.path.abspath(args.base_lib))
        IMPLS["base_flash"] = lambda lib: Flashtrain(base, 0)
        IMPLS["base_flash_det"] = lambda lib: Flashtrain(base, 0, 4)
    BUDGET_MS, TIMING = args.budget_ms, args.timing
    D, H = args.d, HD // args.d
    args.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    card = torch.cuda.get_device_name().replace("NVIDIA ", "").split()[0].lower()
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__, f"D={D} H={H}", flush=True)
    sanity(lib)

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
    for T in [int(t) for t in args.ts.split(",")]:
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
                row = {"impl": name, "T": T, "B": B, "H": H, "D": D, "dropout": p, "fwd_ms": None, "bwd_ms": None,
                       "fwdbwd_ms": None, "fwd_tflops": None, "fwdbwd_tflops": None,
                       "peak_mib": None}
                if runs[name]:
                    f, b, fb = (statistics.median(m[i] for m in runs[name]) for i in range(3))
                    row.update(fwd_ms=f, bwd_ms=b, fwdbwd_ms=fb, fwd_tflops=fl / f / 1e9,
                               fwdbwd_tflops=3.5 * fl / fb / 1e9, peak_mib=runs[name][0][3])
                if name in errors:
                    row["error"] = errors[name]
                rows.append(row)
                print(f"T={T:5d} B={B:2d} D={D} p={p} {name:17s} fwd {fmt(row['fwd_ms'], '.3f')} ms "
                      f"bwd {fmt(row['bwd_ms'], '.3f')} fwdbwd {fmt(row['fwdbwd_ms'], '.3f')} ms "
                      f"{fmt(row['fwdbwd_tflops'], '.0f')} TF peak {fmt(row['peak_mib'], '.0f')} MiB "
                      f"({len(runs[name])} rounds) {row.get('error', '')}", flush=True)
            write_outputs(args, card, rows)
        del qkv, dout
        torch.cuda.empty_cache()
    write_outputs(args, card, rows, quiet=False)



if __name__ == "__main__":
    main()
