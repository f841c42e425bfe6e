#!/usr/bin/env python3
"""Turns bench/train/train_bench.sh's JSON rows into OUT_DIR/train-<card>.json and .md: a table
(tokens/s, step time, MFU from 6N + 6*L*C*T FLOPs per token against a dense bf16 peak, ratios to
torch.compile and llm.c at the same T, B, dropout, peak memory) and issue 17's bars:
  - T=1024 B=16 dropout 0: flashtrain / llmc_cudnn tokens/s >= 1.10
  - T=1024 B=16 dropout 0.1, deterministic: flashtrain / torch_compile >= 1.15
  - T=1024 B=16 dropout 0: flashtrain peak memory <= llm.c's (against llm.c's device usage, and,
    stricter, against the sum of its own buffers)
  - T=4096 B=4 dropout 0.1, deterministic: flashtrain / torch_compile >= 1.15
  - dropout 0.1: deterministic costs at most 3% of tokens/s against atomic dQ (each shape)
flashtrain's rows are deterministic unless a bar says otherwise.

    python3 bench/train/summarize_train.py rows.jsonl [--card h100] [--card-name "NVIDIA H100 ..."]
        [--commit abc1234] [--date ISO] [--json out.json] [--md out.md] [--peak-tflops 989]
Without --md the markdown goes to stdout.
"""
import argparse
import datetime
import json
import sys

N_PARAMS = 124_439_808  # GPT-2-small with tied embeddings, 1024 positions (wpe rows scale with T)
L, C = 12, 768
IMPL_ORDER = ["flashtrain", "torch_compile", "torch_eager", "llmc_cudnn"]


def n_params(T):
    return N_PARAMS + (T - 1024) * C


def load_rows(path):
    rows = []
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            print(f"summarize_train: skipping a bad row ({e}): {line[:120]}", file=sys.stderr)
    return rows


def find(rows, impl, T, B, p, det=None):
    for r in rows:
        if (r.get("impl") == impl and r.get("T") == T and r.get("B") == B and abs(r.get("dropout", 0) - p) < 1e-9
                and (det is None or bool(r.get("deterministic")) == det) and r.get("tokens_per_s")):
            return r
    return None


def ratio_bar(name, num, den, bar, higher=True):
    """One bar line: value num/den against bar (>= when higher, else <=)."""
    if not num or not den:
        missing = " and ".join(n for n, r in (("numerator", num), ("denominator", den)) if not r)
        return {"bar": name, "value": None, "target": bar, "pass": None, "note": f"n/a ({missing} missing)"}
    v = num / den
    ok = v >= bar if higher else v <= bar
    return {"bar": name, "value": v, "target": bar, "pass": ok}


def bars(rows):
    out = []
    ft0 = find(rows, "flashtrain", 1024, 16, 0.0, True)
    ft1 = find(rows, "flashtrain", 1024, 16, 0.1, True)
    llmc = find(rows, "llmc_cudnn", 1024, 16, 0.0)
    tc1 = find(rows, "torch_compile", 1024, 16, 0.1)
    out.append(ratio_bar("T=1024 B=16 dropout 0: flashtrain / llmc_cudnn tokens/s >= 1.10",
                         ft0 and ft0["tokens_per_s"], llmc and llmc["tokens_per_s"], 1.10))
    out.append(ratio_bar("T=1024 B=16 dropout 0.1: flashtrain (deterministic) / torch_compile tokens/s >= 1.15",
                         ft1 and ft1["tokens_per_s"], tc1 and tc1["tokens_per_s"], 1.15))
    out.append(ratio_bar("T=1024 B=16 dropout 0: flashtrain peak / llm.c device memory in use <= 1.00",
                         ft0 and ft0.get("peak_mib"), llmc and llmc.get("peak_mib"), 1.0, higher=False))
    out.append(ratio_bar("T=1024 B=16 dropout 0: flashtrain peak / llm.c's own buffers (stricter) <= 1.00",
                         ft0 and ft0.get("peak_mib"), llmc and llmc.get("alloc_mib"), 1.0, higher=False))
    ft4 = find(rows, "flashtrain", 4096, 4, 0.1, True)
    tc4 = find(rows, "torch_compile", 4096, 4, 0.1)
    out.append(ratio_bar("T=4096 B=4 dropout 0.1: flashtrain (deterministic) / torch_compile tokens/s >= 1.15",
                         ft4 and ft4["tokens_per_s"], tc4 and tc4["tokens_per_s"], 1.15))
    for T, B in sorted({(r["T"], r["B"]) for r in rows if r.get("impl") == "flashtrain"}):
        det = find(rows, "flashtrain", T, B, 0.1, True)
        atom = find(rows, "flashtrain", T, B, 0.1, False)
        b = ratio_bar(f"T={T} B={B} dropout 0.1: deterministic cost (1 - det / atomic tokens/s) <= 3%",
                      atom and det and atom["tokens_per_s"] - det["tokens_per_s"], atom and atom["tokens_per_s"], 0.03,
                      higher=False)
        if atom and det and atom["tokens_per_s"] == det["tokens_per_s"]:  # zero cost: ratio_bar saw a 0 numerator
            b = {"bar": b["bar"], "value": 0.0, "target": 0.03, "pass": True}
        out.append(b)
    return out


def table(rows, peak_tflops):
    lines = ["| T | B | dropout | impl | deterministic | tokens/s | step ms | MFU | vs torch.compile | vs llm.c | peak MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    order = {k: i for i, k in enumerate(IMPL_ORDER)}
    key = lambda r: (r["T"], -r["B"], r.get("dropout", 0), order.get(r["impl"], 99), not r.get("deterministic"))
    for r in sorted(rows, key=key):
        T, B, p = r["T"], r["B"], r.get("dropout", 0.0)
        head = f"| {T} | {B} | {p:g} | {r['impl']} | {'yes' if r.get('deterministic') else 'no'} |"
        tps = r.get("tokens_per_s")
        if not tps:
            err = str(r.get("error", "")).replace("|", "/").replace("\n", " ")[-120:]
            lines.append(f"{head} failed | | | | | {err} |")
            continue
        mfu = tps * (6 * n_params(T) + 6 * L * C * T) / (peak_tflops * 1e12)
        tc = find(rows, "torch_compile", T, B, p)
        lc = find(rows, "llmc_cudnn", T, B, p)
        vs_tc = f"{tps / tc['tokens_per_s']:.2f}x" if tc else ""
        vs_lc = f"{tps / lc['tokens_per_s']:.2f}x" if lc else ""
        step = r.get("step_ms") or 1000 * T * B / tps
        peak = f"{r['peak_mib']:,.0f}" if r.get("peak_mib") else ""
        if r.get("alloc_mib"):
            peak += f" (buffers {r['alloc_mib']:,.0f})"
        lines.append(f"{head} {tps:,.0f} | {step:.1f} | {100 * mfu:.1f}% | {vs_tc} | {vs_lc} | {peak} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rows")
    ap.add_argument("--card", default="unknown")
    ap.add_argument("--card-name", default="")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--date", default=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--md", default=None)
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak (H100/H200 SXM: 989)")
    a = ap.parse_args()
    rows = [r for r in load_rows(a.rows) if all(k in r for k in ("impl", "T", "B"))]
    bar_list = bars(rows)
    ft = [r for r in rows if r.get("impl") == "flashtrain" and r.get("steps")]
    ft_measure = (f"tokens/s the median of the {ft[0]['timed_intervals']} intervals of 10 steps ending at steps 20-"
                  f"{ft[0]['steps']} (their min and max in the JSON)" if ft and "timed_intervals" in ft[0]
                  else "tokens/s of the last 10 of 40 steps")
    md = [f"# GPT-2-small training: {a.card} ({a.card_name or a.card}), commit {a.commit}, {a.date}", "",
          "bench/train/train_bench.sh: bf16, one micro-batch per step, random or KJV tokens. flashtrain: "
          f"configs/gpt2-small.yaml with compile_model (CUDA graph), {ft_measure}, peak = "
          "its caching allocator's peak. torch_*: bench/train/torch_nanogpt.py (nanoGPT-style model, fused AdamW, "
          "grad clip), median of 20 steps, peak = torch.cuda.max_memory_allocated. llmc_cudnn: llm.c with cuDNN "
          "attention, -r 0, median of steps 6-30, no dropout, T <= 1024; peak = device memory in use "
          "(cudaMemGetInfo, CUDA context included), its own buffers in brackets. "
          f"MFU against {a.peak_tflops:g} TFLOP/s.", ""]
    md += table(rows, a.peak_tflops)
    md += ["", "## Issue 17's bars", "", "| bar | value | target | |", "|---|---|---|---|"]
    for b in bar_list:
        pct = "cost" in b["bar"]
        val = "n/a" if b["value"] is None else (f"{100 * b['value']:.1f}%" if pct else f"{b['value']:.3f}")
        tgt = f"{100 * b['target']:.0f}%" if pct else f"{b['target']:.2f}"
        verdict = b.get("note") or ("PASS" if b["pass"] else "FAIL")
        md.append(f"| {b['bar']} | {val} | {tgt} | {verdict} |")
    text = "\n".join(md) + "\n"
    if a.md:
        open(a.md, "w").write(text)
    else:
        sys.stdout.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"card": a.card, "card_name": a.card_name, "commit": a.commit, "date": a.date,
                       "rows": rows, "bars": bar_list}, f, indent=1)


if __name__ == "__main__":
    main()
