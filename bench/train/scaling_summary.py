#!/usr/bin/env python3
"""Turns bench/train/scaling.sh's rows into bench/results/scaling-<card>.json (rows {gpus,
tokens_per_s, step_ms, peak_mib, zero1} plus the run's flags) and a markdown table with the
weak-scaling efficiency tokens_per_s(N) / (N * tokens_per_s(1)) against the 1-GPU row of the same
flags (zero1 and compile_model; the no-overlap row against the plain 1-GPU row), and the issue's
bar (>= 0.97 on 2 GPUs, >= 0.95 on 8).

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rows")
    ap.add_argument("--card", required=True)
    ap.add_argument("--results", default="bench/results")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.rows) if l.strip()]
    base = {}
    for r in rows:
        if r["gpus"] == 1 and r["tokens_per_s"] and r.get("overlap", True):
            base[(r["zero1"], r.get("compile_model", False))] = r["tokens_per_s"]
    for r in rows:
        b = base.get((r["zero1"], r.get("compile_model", False)))
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
        json.dump(rows, f, indent=1)
    lines = [f"# Data-parallel scaling on {a.card}",
             "",
             f"GPT-2-small, T = 1024, B = 16 per GPU, bf16, 1 micro-batch per step (bench/train/scaling.sh); "
             f"{datetime.date.today()}, commit {commit or 'unknown'}.",
             "Weak-scaling efficiency = tokens/s(N) / (N x tokens/s(1)), against 1 GPU with the same flags. "
             "Bar: >= 0.97 on 2 GPUs, >= 0.95 on 8.",
             "",
             "| GPUs | ZeRO-1 | overlap | compile_model | tokens/s | step ms | peak MiB | efficiency | bar |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tps = f"{r['tokens_per_s']:,.0f}" if r["tokens_per_s"] else f"failed (rc {r.get('rc')})"
        step = f"{r['step_ms']:.1f}" if r.get("step_ms") else ""
        peak = f"{r['peak_mib']:,.0f}" if r.get("peak_mib") else ""
        eff = f"{r['efficiency']:.3f}" if r.get("efficiency") else ""
        bar = ""
        if r["gpus"] > 1 and r.get("efficiency") and r.get("overlap", True) and not r["zero1"]:
            need = 0.97 if r["gpus"] <= 2 else 0.95
            bar = "PASS" if r["efficiency"] >= need else f"FAIL (< {need})"
        lines.append(f"| {r['gpus']} | {'on' if r['zero1'] else 'off'} | {'on' if r.get('overlap', True) else 'off'} | "
                     f"{'on' if r.get('compile_model') else 'off'} | {tps} | {step} | {peak} | {eff} | {bar} |")
    z_off = {r["gpus"]: r for r in rows if not r["zero1"] and r.get("overlap", True) and not r.get("compile_model")}
    z_on = {r["gpus"]: r for r in rows if r["zero1"] and not r.get("compile_model")}
    for n in sorted(set(z_off) & set(z_on)):
        if n > 1 and z_off[n].get("peak_mib") and z_on[n].get("peak_mib"):
            lines += ["", f"ZeRO-1 on {n} GPUs: peak {z_on[n]['peak_mib']:,.0f} MiB vs {z_off[n]['peak_mib']:,.0f} MiB "
                      f"without ({z_off[n]['peak_mib'] - z_on[n]['peak_mib']:,.0f} MiB saved on rank 0)."]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.results, f"scaling-{slug}.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
