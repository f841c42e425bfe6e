#!/usr/bin/env python3
"""Groups the kernels of one flashtrain training step, from Nsight Compute's CSV, by part of the step.

bench/train/step_profile.sh runs `ncu --metrics gpu__time_duration.sum --csv` over a few eager
training steps (compile_model false) and calls this. Steps are split at the AdamW kernel
(ops/cuda/adamw.cu's adamw_kernel; one launch per parameter group, so a step ends at a cluster of
launches); the LAST full step (after the second-to-last AdamW cluster, through the last) is the
one reported, so the first step's cuBLASLt heuristics and allocator growth stay out. Each kernel
is also given a phase by its position: forward (up to the cross-entropy forward), backward (up to
the first grad-norm or AdamW kernel), optimizer (the rest).

Parts follow where the kernels are defined (grep "__global__" ops core): ops/cuda/attention/ ->
attention forward / backward, layernorm.cu -> LayerNorm, activation.cu -> GELU, dropout.cu ->
dropout, elementwise.cu -> residual adds / elementwise and casts, cross_entropy.cu -> cross-entropy,
embedding.cu (and CUB's radix sort it calls) -> embedding, adamw.cu -> AdamW, grad_norm.cu -> grad
norm, reduce.cu -> bias grads / reductions, core/cuda/copy.cu -> copies / casts / fills; cuBLAS and
cuBLASLt names (gemm, xmma, cutlass, nvjet, sm90_...) -> matmuls. Whatever matches nothing is
"other" and its names are listed, so a new kernel shows up rather than hides.

    python3 bench/train/step_profile.py NCU_CSV --out-prefix OUT_DIR/step-profile-h100[-label]
        [--title "..."] [--meta key=value ...]
Writes OUT_PREFIX.md and OUT_PREFIX.json; prints the md.
"""
import argparse
import csv
import gzip
import json
import re
import sys
from collections import OrderedDict, defaultdict

METRIC = "gpu__time_duration.sum"
UNIT_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
           "second": 1e3, "s": 1e3}

# (part, regex on the kernel name); the first match wins, so our own kernels come before the
# library patterns (a template argument could mention anything).
# llm.c's kernels (karpathy/llm.c's llmc/*.cuh) and cuDNN's attention are named too, so that a
# trace of llm.c groups the same way (bench/profile/kernel_trace_summary.py --parts).
RULES = [
    ("attention backward", r"flash_bwd_|naive_softmax_bwd|sdpa.*(bprop|dgrad|bwd)|softmax_autoregressive_backward|"
     r"cudnn::fusion::(matmul_dq|compute_dot_do_o)"),
    ("attention forward", r"flash_fwd_|naive_softmax_fwd|sdpa.*(fprop|fwd)|softmax_forward_kernel5"),
    ("LayerNorm backward", r"layernorm_backward|residual_layernorm_backward|resln_backward"),
    ("LayerNorm forward", r"layernorm_forward|residual_layernorm_forward|resln_forward|fused_residual_forward"),
    ("GELU backward", r"activation_kernel<[^,<>]+,\s*\d+,\s*(true|\(bool\)1|1)\s*,|gelu_backward"),
    ("GELU forward", r"activation_kernel|gelu_forward"),
    ("dropout", r"dropout_kernel"),
    ("cross-entropy / head", r"cross_entropy_|fused_classifier"),
    ("softmax", r"softmax_(forward|backward)_"),
    ("embedding", r"embedding_|DeviceRadixSort|cub::|RadixSort|encoder_(forward|backward)|wte_backward|wpe_backward"),
    ("AdamW", r"adamw_kernel"),
    ("grad norm", r"grad_norm_|global_norm_|global_sum_single_block"),
    ("bias grads / reductions", r"reduce_(rows|cols|splits|backward)|sum_rows_|partial_sums_kernel|matmul_backward_bias|reduce_add_sum"),
    ("residual adds / elementwise", r"binary_kernel|binary_vec_kernel|axpby_kernel|axpby_vec_kernel|scalar_ratio_kernel|residual_forward_kernel"),
    ("copies / casts / fills", r"cast_kernel|strided_copy_kernel|fill_kernel|memcpy|memset|permute_kernel|copy_and_cast|init_from_master"),
    ("matmuls", r"gemm|xmma|cutlass|nvjet|sm90_|sm80_|cublas|splitKreduce|ampere_|hopper_"),
]
RULES = [(part, re.compile(rx)) for part, rx in RULES]
PART_ORDER = [p for p, _ in RULES] + ["other"]
ADAMW = re.compile(r"adamw_kernel")
CE_FWD = re.compile(r"cross_entropy_forward")
OPT_START = re.compile(r"grad_norm_|adamw_kernel")


def classify(name):
    for part, rx in RULES:
        if rx.search(name):
            return part
    return "other"


def short_name(name, width=110):
    """'void ft::cuda::(anonymous namespace)::foo_kernel<__nv_bfloat16, 8>(ft::cuda::P)' -> 'foo_kernel<bf16, 8>'."""
    s = re.sub(r"^void\s+", "", name.strip())
    s = re.sub(r"\((anonymous namespace|<unnamed>)\)::|<unnamed>::|\bft::cuda::|\bft::", "", s)
    # drop the parameter list: the last top-level parenthesised group
    depth, cut = 0, len(s)
    for i in range(len(s) - 1, -1, -1):
        c = s[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                cut = i
                break
    if cut > 0 and s.endswith(")"):
        s = s[:cut]
    s = s.replace("__nv_bfloat16", "bf16").replace("__half", "f16")
    return s if len(s) <= width else s[: width - 3] + "..."


def open_text(path):
    return gzip.open(path, "rt", errors="replace") if path.endswith(".gz") else open(path, errors="replace")


def read_ncu_csv(path):
    """[(id, name, ms)] in launch order. Skips ncu's ==PROF== lines and the program's own output
    before the header; accepts values with thousands separators."""
    with open_text(path) as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        raise SystemExit(f"step_profile: no ncu CSV header (a line starting with \"ID\") in {path}")
    header = next(csv.reader([lines[start]]))
    col = {h: i for i, h in enumerate(header)}
    for need in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"):
        if need not in col:
            raise SystemExit(f"step_profile: column {need!r} missing from {path}")
    kernels = OrderedDict()
    for rec in csv.reader(l for l in lines[start + 1:] if l.startswith('"')):
        if len(rec) != len(header) or rec[col["Metric Name"]] != METRIC:
            continue
        unit = rec[col["Metric Unit"]].strip()
        if unit not in UNIT_MS:
            raise SystemExit(f"step_profile: unknown unit {unit!r} for {METRIC}")
        try:
            value = float(rec[col["Metric Value"]].replace(",", "").replace(" ", ""))
            kid = int(rec[col["ID"]].replace(",", ""))
        except ValueError:
            continue
        kernels[kid] = (rec[col["Kernel Name"]], value * UNIT_MS[unit])
    return [(k, n, ms) for k, (n, ms) in sorted(kernels.items())]


def last_full_step(kernels, gap=16):
    """Kernels of the last full step: AdamW launches within `gap` launches of each other form one
    cluster (one optimizer step); the step is what follows the second-to-last cluster, through
    the last. With a single cluster, everything through it (a first step: reported, flagged)."""
    idx = [i for i, (_, n, _) in enumerate(kernels) if ADAMW.search(n)]
    if not idx:
        raise SystemExit("step_profile: no adamw_kernel in the profile: did a step finish?")
    clusters = [[idx[0]]]
    for i in idx[1:]:
        if i - clusters[-1][-1] <= gap:
            clusters[-1].append(i)
        else:
            clusters.append([i])
    if len(clusters) >= 2:
        return kernels[clusters[-2][-1] + 1: clusters[-1][-1] + 1], len(clusters), True
    return kernels[: clusters[-1][-1] + 1], 1, False


def phases(step):
    """forward / backward / optimizer for each kernel of the step, by position."""
    ce = next((i for i, (_, n, _) in enumerate(step) if CE_FWD.search(n)), None)
    opt = next((i for i, (_, n, _) in enumerate(step) if OPT_START.search(n)), len(step))
    out = []
    for i in range(len(step)):
        if i >= opt:
            out.append("optimizer")
        elif ce is not None and i <= ce:
            out.append("forward")
        elif ce is None:
            out.append("forward/backward")
        else:
            out.append("backward")
    return out


def analyse(kernels):
    step, n_steps, full = last_full_step(kernels)
    ph = phases(step)
    total = sum(ms for _, _, ms in step)
    parts = defaultdict(lambda: {"kernels": 0, "ms": 0.0})
    phase_ms = defaultdict(float)
    by_phase_part = defaultdict(float)
    names = defaultdict(lambda: {"count": 0, "ms": 0.0})
    other = defaultdict(int)
    for (_, name, ms), phase in zip(step, ph):
        part = classify(name)
        if part.startswith("GELU") and "<" not in name:  # names without template arguments: by position
            part = "GELU backward" if phase == "backward" else "GELU forward"
        parts[part]["kernels"] += 1
        parts[part]["ms"] += ms
        phase_ms[phase] += ms
        by_phase_part[(part, phase)] += ms
        names[name]["count"] += 1
        names[name]["ms"] += ms
        if part == "other":
            other[short_name(name)] += 1
    part_rows = []
    for part in PART_ORDER:
        if part not in parts:
            continue
        p = parts[part]
        split = {ph_: round(v, 4) for (pt, ph_), v in by_phase_part.items() if pt == part}
        part_rows.append({"part": part, "kernels": p["kernels"], "ms": round(p["ms"], 4),
                          "pct": round(100 * p["ms"] / total, 2) if total else 0.0, "by_phase_ms": split})
    top = sorted(names.items(), key=lambda kv: -kv[1]["ms"])[:15]
    part_of = lambda n: "GELU" if classify(n).startswith("GELU") and "<" not in n else classify(n)
    top_rows = [{"kernel": short_name(n), "part": part_of(n), "count": v["count"], "ms": round(v["ms"], 4),
                 "pct": round(100 * v["ms"] / total, 2) if total else 0.0, "full_name": n} for n, v in top]
    return {"step_kernel_ms": round(total, 4), "step_kernels": len(step), "steps_seen": n_steps,
            "full_step": full, "profiled_kernels": len(kernels),
            "phases_ms": {k: round(v, 4) for k, v in phase_ms.items()},
            "parts": part_rows, "top_kernels": top_rows, "other_kernels": dict(other)}


def markdown(res, title, meta):
    total = res["step_kernel_ms"]
    md = [f"# {title}", ""]
    if meta:
        md += ["; ".join(f"{k}: {v}" for k, v in meta.items()), ""]
    note = "" if res["full_step"] else " (only one AdamW step in the profile: this is the FIRST step, warm-up included)"
    md += [f"Last full training step of {res['steps_seen']} profiled{note}: {res['step_kernels']} kernels, "
           f"{total:.2f} ms of kernel time (sum of gpu__time_duration under ncu, one kernel at a time: no "
           "overlap, no launch gaps; the step's wall time is longer in an eager run and about this in a CUDA graph).",
           "", "Phases: " + ", ".join(f"{k} {v:.2f} ms ({100 * v / total:.1f}%)" for k, v in res["phases_ms"].items()),
           "", "| part | kernels | ms | % of step | forward / backward / optimizer ms |", "|---|---|---|---|---|"]
    for p in res["parts"]:
        split = " / ".join(f"{p['by_phase_ms'].get(ph, 0):.2f}" for ph in ("forward", "backward", "optimizer"))
        md.append(f"| {p['part']} | {p['kernels']} | {p['ms']:.3f} | {p['pct']:.1f}% | {split} |")
    md.append(f"| **total** | {res['step_kernels']} | {total:.3f} | 100% | |")
    md += ["", "Top 15 kernels by time in the step:", "", "| kernel | part | count | ms | % of step |",
           "|---|---|---|---|---|"]
    for t in res["top_kernels"]:
        md.append(f"| `{t['kernel']}` | {t['part']} | {t['count']} | {t['ms']:.3f} | {t['pct']:.1f}% |")
    if res["other_kernels"]:
        md += ["", "Unclassified (\"other\") kernels: " + ", ".join(f"`{n}` x{c}" for n, c in res["other_kernels"].items())]
    return "\n".join(md) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--out-prefix", required=True)
    ap.add_argument("--title", default="flashtrain training step profile")
    ap.add_argument("--meta", nargs="*", default=[], help="key=value pairs for the header and the JSON")
    a = ap.parse_args()
    meta = OrderedDict(kv.split("=", 1) for kv in a.meta if "=" in kv)
    kernels = read_ncu_csv(a.csv)
    if not kernels:
        raise SystemExit(f"step_profile: no {METRIC} rows in {a.csv}")
    res = analyse(kernels)
    md = markdown(res, a.title, meta)
    open(a.out_prefix + ".md", "w").write(md)
    with open(a.out_prefix + ".json", "w") as f:
        json.dump({"title": a.title, **meta, **res}, f, indent=1)
    sys.stdout.write(md)


if __name__ == "__main__":
    main()
