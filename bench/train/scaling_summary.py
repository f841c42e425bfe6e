#!/usr/bin/env python3
"""Turns bench/train/scaling.sh's rows into bench/results/scaling-<card>.json and a markdown table.

JSON: {"card", "commit", "rows": [{"impl": "flashtrain" | "torch_ddp_compile", "gpus",
"compile_model", "zero1", "grad_dtype", "tokens_per_s", "step_ms", "peak_mib", ...}]} (each row
also keeps "overlap", "graph_allreduce", "rc", "final_loss" (flashtrain: mean of the last 10 logged losses) and its
"efficiency": tokens_per_s(N) / (N x tokens_per_s(1)) against
the same impl's best 1-GPU row).

The bars (issue 20), printed under the table:
  scaling  best flashtrain row on N GPUs >= f x N x best flashtrain row on 1 GPU, f = 0.98 at
           N <= 2, 0.97 at N <= 4, 0.95 beyond;
  torch    best flashtrain row on N GPUs >= torch_ddp_compile on N GPUs (total tokens/s).

    python3 bench/train/scaling_summary.py rows.jsonl --card "NVIDIA H100 80GB HBM3" [--results DIR]
"""
import argparse
import datetime
import json
import os
import re
import subprocess


def card_slug(name):
    m = re.search(r"\b([AHBL]\d{2,3}[A-Za-z]*)\b", name)
    return (m.group(1) if m else re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")).lower()


def scaling_need(n):
    return 0.98 if n <= 2 else 0.97 if n <= 4 else 0.95


def best(rows, impl, gpus):
    tps = [r["tokens_per_s"] for r in rows if r["impl"] == impl and r["gpus"] == gpus and r["tokens_per_s"]]
    return max(tps) if tps else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rows")
    ap.add_argument("--card", required=True)
    ap.add_argument("--results", default="bench/results")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.rows) if l.strip()]
    for r in rows:
        r.setdefault("impl", "flashtrain")
        b = best(rows, r["impl"], 1)
        r["efficiency"] = round(r["tokens_per_s"] / (r["gpus"] * b), 4) if b and r["tokens_per_s"] else None
    # FT_COMMIT first: the device machine's copy of the tree may carry stale git metadata.
    commit = os.environ.get("FT_COMMIT", "")
    try:
        commit = commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                          text=True).stdout.strip()
    except OSError:
        pass
    slug = card_slug(a.card)
    os.makedirs(a.results, exist_ok=True)
    with open(os.path.join(a.results, f"scaling-{slug}.json"), "w") as f:
        json.dump({"card": a.card, "commit": commit, "rows": rows}, f, indent=1)

    lines = [f"# Data-parallel scaling on {a.card}",
             "",
             f"GPT-2-small, T = 1024, B = 16 per GPU, bf16, 1 micro-batch per step (bench/train/scaling.sh); "
             f"{datetime.date.today()}, commit {commit or 'unknown'}.",
             "Efficiency = tokens/s(N) / (N x best tokens/s of the same impl on 1 GPU).",
             "",
             "Overlap: \"on\" = buckets all-reduced during the backward pass (with compile_model: inside the "
             "graph); \"after replay\" = compile_model with FLASHTRAIN_GRAPH_ALLREDUCE=0 (issue 7's way); "
             "\"off\" = after the backward pass. ZeRO-1 \"(copy engines)\": its reduce-scatter copied to the owners "
             "during the backward (zero1_transport, session 19), \"(NCCL)\": after it.",
             "",
             "| impl | GPUs | compile_model | ZeRO-1 | grad dtype | overlap | tokens/s | step ms | peak MiB | efficiency |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tps = f"{r['tokens_per_s']:,.0f}" if r["tokens_per_s"] else f"failed (rc {r.get('rc')})"
        step = f"{r['step_ms']:.1f}" if r.get("step_ms") else ""
        peak = f"{r['peak_mib']:,.0f}" if r.get("peak_mib") else ""
        eff = f"{r['efficiency']:.3f}" if r.get("efficiency") else ""
        onoff = lambda v: "on" if v else "off"  # noqa: E731
        overlap = onoff(r.get("overlap", True))
        if r["impl"] == "flashtrain" and r["gpus"] > 1 and r.get("compile_model") and not r.get("graph_allreduce", True):
            overlap = "after replay"
        if r.get("zero1") and r.get("zero1_transport") == "copy_engines":
            overlap = "on"  # the copies run during the backward (inside the graph with compile_model)
        zero1 = onoff(r.get("zero1"))
        if r.get("zero1") and r.get("zero1_transport"):
            zero1 += " (copy engines)" if r["zero1_transport"] == "copy_engines" else " (NCCL)"
        lines.append(f"| {r['impl']} | {r['gpus']} | {onoff(r.get('compile_model'))} | {zero1} | "
                     f"{r.get('grad_dtype', 'fp32')} | {overlap} | {tps} | {step} | {peak} | {eff} |")
    lines.append("")
    one = best(rows, "flashtrain", 1)
    for n in sorted({r["gpus"] for r in rows if r["gpus"] > 1}):
        ft = best(rows, "flashtrain", n)
        if ft and one:
            need = scaling_need(n)
            eff = ft / (n * one)
            lines.append(f"- scaling bar, {n} GPUs: best flashtrain {ft:,.0f} tokens/s = {eff:.3f} x {n} x best 1-GPU "
                         f"{one:,.0f}: {'PASS' if eff >= need else f'FAIL (< {need})'}")
        th = best(rows, "torch_ddp_compile", n)
        if ft and th:
            lines.append(f"- torch bar, {n} GPUs: flashtrain {ft:,.0f} vs PyTorch DDP + torch.compile {th:,.0f} "
                         f"tokens/s ({ft / th:.3f}x): {'PASS' if ft >= th else 'FAIL (< torch)'}")
    for n in sorted({r["gpus"] for r in rows if r["gpus"] > 1}):
        for cm in (True, False):
            pick = lambda gd: next((r for r in rows if r["impl"] == "flashtrain" and r["gpus"] == n  # noqa: E731
                                    and r.get("compile_model") == cm and not r["zero1"] and r.get("overlap", True)
                                    and r.get("graph_allreduce", cm) == cm and r.get("grad_dtype") == gd
                                    and r.get("final_loss")), None)
            f32, b16 = pick("fp32"), pick("bf16")
            if f32 and b16:
                lines.append(f"- bf16 gradient wire on {n} GPUs (compile_model {'on' if cm else 'off'}): "
                             f"{b16['tokens_per_s'] / f32['tokens_per_s']:.3f}x the fp32 tokens/s; mean of the "
                             f"last 10 logged losses {b16['final_loss']:.4f} vs {f32['final_loss']:.4f} "
                             f"({b16['final_loss'] - f32['final_loss']:+.4f}).")
    z_off = {r["gpus"]: r for r in rows if r["impl"] == "flashtrain" and not r["zero1"] and r.get("compile_model")
             and r.get("overlap", True) and r.get("graph_allreduce", True) and r.get("grad_dtype", "fp32") == "fp32"}
    z_on = {r["gpus"]: r for r in rows if r["impl"] == "flashtrain" and r["zero1"] and r.get("compile_model")}
    for n in sorted(set(z_off) & set(z_on)):
        if n > 1 and z_off[n].get("peak_mib") and z_on[n].get("peak_mib"):
            lines.append(f"- ZeRO-1 on {n} GPUs: peak {z_on[n]['peak_mib']:,.0f} MiB vs {z_off[n]['peak_mib']:,.0f} MiB "
                         f"without ({z_off[n]['peak_mib'] - z_on[n]['peak_mib']:,.0f} MiB saved on rank 0).")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.results, f"scaling-{slug}.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
