"""Where a CTA of the warp-specialised backward spends its time: runs one backward with the dev trace
on (ops/cuda/attention/flash_bwd_trace.cuh) and prints each phase's mean and median over the CTAs,
the CTAs by tile count, and the gaps on each SM between one CTA's end and the next one's start.
The library must be built with -DFT_FLASH_BWD_TRACE (the trace costs a few stores a CTA; time
nothing else with that build), e.g.
  cmake -S . -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DFT_FLASH_BWD_TRACE
  cmake --build build-trace --target ft_attention_capi
  python3 bench/attention/dev/ws_trace.py build-trace/bench/attention/libft_attention.so \\
      [--d 64] [--t 1024] [--p 0] [--variant 4] [--json OUT]
Causal, bf16, B T = 32768, H = 768 / D, as bench_attention.py; variant 0 is the atomic dQ, 4 the
deterministic backward (attention_capi.cu). The warp-specialised backward must take the call
(sm_90a, T >= 1024 by default) in its non-persistent form: the persistent one (the atomic dQ, and
D = 64's ordered dQ, at D = 64 without dropout or with it up to T = 2048; flash_bwd_ws.cu) records
nothing, its CTAs running many key blocks each. So trace D = 64 with dropout at T > 2048, or the
deterministic backward at D = 128. %globaltimer may tick in steps of up to a microsecond: one CTA's
phases are that coarse, the means over thousands of CTAs are not. Run in session 30 (H200; its numbers are in bench/results/attention-persistent-bwd-h200.md,
taken before the persistent form)."""
import argparse
import ctypes
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402

import bench_attention as ba  # noqa: E402

# flash_bwd_trace.cuh's WsTraceWord
START, KV, FIRST_Q, FIRST_TILE, LAST_TILE, EPILOGUE, CONSUMER1, DQ, SM, WORK, WORDS = (*range(10), 16)


def phases(r):
    """A record's phases in microseconds (None where the record lacks the times)."""
    us = lambda a, b: (r[b] - r[a]) / 1e3 if r[a] and r[b] else None
    tiles = r[WORK] & 0xFFFF
    end = max(r[EPILOGUE], r[CONSUMER1], r[DQ])
    return {
        "K/V wait": us(START, KV),
        "first Q wait": us(KV, FIRST_Q),
        "first tile": us(FIRST_Q, FIRST_TILE),
        "per later tile": (r[LAST_TILE] - r[FIRST_TILE]) / 1e3 / (tiles - 1) if tiles > 1 else None,
        "dK/dV epilogue": us(LAST_TILE, EPILOGUE),
        "dQ tail after the last tile": (r[DQ] - r[LAST_TILE]) / 1e3 if r[DQ] > r[LAST_TILE] else 0.0,
        "whole CTA": (end - r[START]) / 1e3,
    }


def summarise(rec, label):
    """Prints the phases of the records `rec` (one list of WORDS ints per CTA) and returns them."""
    missing = sum(1 for r in rec if not r[START] or not r[EPILOGUE])
    if missing:
        sys.exit(f"ws_trace: {missing} of {len(rec)} CTAs wrote no record: did the warp-specialised backward take "
                 f"the call (T >= 1024, sm_90a) in its non-persistent form (not the atomic dQ, nor D = 64's ordered "
                 f"dQ without dropout or with it at T <= 2048)?")
    ph = [phases(r) for r in rec]
    t0 = min(r[START] for r in rec)
    span = (max(max(r[EPILOGUE], r[CONSUMER1], r[DQ]) for r in rec) - t0) / 1e3
    busy = sum(x["whole CTA"] for x in ph)
    sms = sorted({r[SM] for r in rec})
    print(f"ws_trace {label}: {len(rec)} CTAs on {len(sms)} SMs, "
          f"kernel span {span:.1f} us, SMs busy with a CTA {100 * busy / (len(sms) * span):.1f}% of it")
    summary = {"span_us": span, "busy_pct": 100 * busy / (len(sms) * span)}
    print(f"{'phase':30s} {'mean us':>9s} {'median':>9s} {'p90':>9s}")
    for name in ph[0]:
        v = sorted(x[name] for x in ph if x[name] is not None)
        if not v:
            continue
        summary[name] = {"mean": statistics.fmean(v), "median": v[len(v) // 2], "p90": v[int(0.9 * (len(v) - 1))]}
        print(f"{name:30s} {summary[name]['mean']:9.2f} {summary[name]['median']:9.2f} {summary[name]['p90']:9.2f}")
    by_tiles = {}
    for r, x in zip(rec, ph):
        by_tiles.setdefault(r[WORK] & 0xFFFF, []).append(x["whole CTA"])
    print("CTA time by query tiles (tiles: CTAs, mean us):",
          ", ".join(f"{k}: {len(v)}, {statistics.fmean(v):.1f}" for k, v in sorted(by_tiles.items())))
    gaps = []
    for sm in sms:
        runs = sorted((r[START], max(r[EPILOGUE], r[CONSUMER1], r[DQ])) for r in rec if r[SM] == sm)
        gaps += [(b[0] - a[1]) / 1e3 for a, b in zip(runs, runs[1:])]
    gaps.sort()
    if gaps:
        print(f"gap on an SM between a CTA's end and the next one's start: mean {statistics.fmean(gaps):.2f} us, "
              f"median {gaps[len(gaps) // 2]:.2f}, p90 {gaps[int(0.9 * (len(gaps) - 1))]:.2f}")
        summary["sm gap"] = {"mean": statistics.fmean(gaps), "median": gaps[len(gaps) // 2]}
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lib")
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--t", type=int, default=1024)
    ap.add_argument("--p", type=float, default=0.0)
    ap.add_argument("--variant", type=int, default=4)
    ap.add_argument("--json", help="also write the records and the summary here")
    args = ap.parse_args()
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    if not hasattr(lib, "ft_attn_ws_trace"):
        sys.exit("ws_trace: this library has no ft_attn_ws_trace (older than session 29)")
    lib.ft_attn_ws_trace.argtypes = [ctypes.c_void_p]
    lib.ft_attn_ws_trace.restype = ctypes.c_int
    lib.ft_attn_last_error.restype = ctypes.c_char_p
    ba.D, ba.H = args.d, ba.HIDDEN // args.d
    B, T = ba.TOKENS // args.t, args.t
    grid = (T + 127) // 128 * B * ba.H  # FlashBwdWsTraits: 128 keys a CTA
    qkv, dout = ba.make_inputs(B, T)
    impl = ba.Flashtrain(lib, 0, args.variant)
    impl.setup(qkv, dout, True, args.p)
    for _ in range(3):  # warm-up, untraced
        impl.backward(impl.forward())
    records = torch.zeros(grid * WORDS, dtype=torch.int64, device="cuda")
    state = impl.forward()
    torch.cuda.synchronize()
    if lib.ft_attn_ws_trace(ctypes.c_void_p(records.data_ptr())) != 1:
        sys.exit("ws_trace: the library was built without -DFT_FLASH_BWD_TRACE: "
                 + (lib.ft_attn_last_error() or b"").decode())
    impl.backward(state)
    torch.cuda.synchronize()
    lib.ft_attn_ws_trace(None)
    rec = records.view(grid, WORDS).cpu().tolist()
    summary = summarise(rec, f"D={args.d} T={T} B={B} p={args.p} variant={args.variant}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"d": args.d, "t": T, "b": B, "p": args.p, "variant": args.variant, "summary": summary,
                       "records": rec}, f)


if __name__ == "__main__":
    main()
