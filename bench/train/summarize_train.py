#!/usr/bin/env python3
"""Turns bench/train/train_bench.sh's JSON rows into the markdown table of bench/results/train-*.md:
tokens/s, MFU (6N + 6*L*C*T FLOPs per token against a dense bf16 peak), ratios against PyTorch
eager and torch.compile at the same shape, peak memory.

    python3 bench/train/summarize_train.py rows.jsonl [--peak-tflops 989]
"""
import argparse
import json

N_PARAMS = 124_439_808  # GPT-2-small with tied embeddings, 1024 positions (wpe rows scale with T)
L, C = 12, 768


def n_params(T):
    return N_PARAMS - (1024 - T) * C


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rows")
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.rows) if l.strip()]
    print("| T | B | impl | tokens/s | MFU | vs torch eager | vs torch.compile | peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for T, B in sorted({(r["T"], r["B"]) for r in rows}, reverse=True):
        at = [r for r in rows if r["T"] == T and r["B"] == B]
        ref = {r["impl"]: r["tokens_per_s"] for r in at}
        for r in at:
            tps = r["tokens_per_s"]
            if not tps:
                print(f"| {T} | {B} | {r['impl']} | failed | | | | |")
                continue
            mfu = tps * (6 * n_params(T) + 6 * L * C * T) / (a.peak_tflops * 1e12)
            eager = f"{tps / ref['torch_eager']:.2f}x" if ref.get("torch_eager") else ""
            comp = f"{tps / ref['torch_compile']:.2f}x" if ref.get("torch_compile") else ""
            peak = f"{r['peak_mib']:,.0f}" if r.get("peak_mib") else ""
            print(f"| {T} | {B} | {r['impl']} | {tps:,.0f} | {100 * mfu:.1f}% | {eager} | {comp} | {peak} |")


if __name__ == "__main__":
    main()
