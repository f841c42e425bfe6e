#!/usr/bin/env python3
"""Turns one training run's output into one JSON row for bench/train/train_bench.sh (printed on stdout).

    parse_run.py flashtrain METRICS_JSONL LOG T B DROPOUT DETERMINISTIC
        tokens/s: the median over the logged intervals of metrics.jsonl after its first two (step 1,
        eager, and steps 2-10, which hold the CUDA-graph capture); with 80 steps and log_interval
        10, the seven intervals ending at steps 20-80. One interval moved up to 6% within a run on an H200
        whose clock follows its 700 W cap (session 37: 544.5k, 538.9k, 510.0k in one run), so
        one interval (what rows before session 37 took: the last) is not a measure. Also the
        intervals' min and max. Peak from the log's "peak device memory X MiB" (the caching
        allocator's peak allocated bytes).
    parse_run.py llmc LOG T B
        median step time of steps >= 6 of llm.c's "step i/n | ... | X ms |" lines; peak_mib is
        llm.c's "device memory usage" (cudaMemGetInfo: the whole device in use, CUDA context
        included, read after its buffers are allocated), alloc_mib the sum of its "allocat(ed|ing)
        N MiB" lines (its own buffers only: parameters, gradients, AdamW m, v, master weights,
        activations).

A run that produced nothing still gives a row, with tokens_per_s null and "error" holding the
log's tail, so the table shows the failure instead of dropping the row.
"""
import json
import re
import statistics
import sys


def tail(path, n=400):
    try:
        return open(path, errors="replace").read()[-n:]
    except OSError as e:
        return str(e)


def flashtrain(metrics, log, T, B, p, det):
    T, B, p = int(T), int(B), float(p)
    row = {"impl": "flashtrain", "T": T, "B": B, "dropout": p, "deterministic": det == "true",
           "tokens_per_s": None, "step_ms": None, "peak_mib": None}
    try:
        steps = [json.loads(l) for l in open(metrics) if '"tokens_per_s"' in l]
    except OSError:
        steps = []
    text = tail(log, 10**7)
    peak = re.findall(r"peak device memory ([0-9.]+) MiB", text)
    if steps:
        timed = [s["tokens_per_s"] for s in (steps[2:] if len(steps) > 2 else steps[-1:])]
        tps = statistics.median(timed)
        row.update(tokens_per_s=tps, step_ms=1000 * T * B / tps, steps=steps[-1]["step"],
                   loss=steps[-1]["loss"], tokens_per_s_min=min(timed), tokens_per_s_max=max(timed),
                   timed_intervals=len(timed), tokens_per_s_intervals=[round(s["tokens_per_s"]) for s in steps])
    if peak:
        row["peak_mib"] = float(peak[-1])
    if not steps or not peak:
        row["error"] = text[-400:]
    return row


def llmc(log, T, B):
    T, B = int(T), int(B)
    row = {"impl": "llmc_cudnn", "T": T, "B": B, "dropout": 0.0, "deterministic": False,
           "tokens_per_s": None, "step_ms": None, "peak_mib": None}
    text = tail(log, 10**7)
    ms = [float(m.group(2)) for m in re.finditer(r"step\s+(\d+)/\d+ .*?\|\s*([\d.]+) ms", text)
          if int(m.group(1)) >= 6]
    mem = re.findall(r"device memory usage: (\d+) MiB", text)
    alloc = [int(v) for v in re.findall(r"allocat(?:ed|ing) (\d+) MiB", text)]
    if ms:
        med = statistics.median(ms)
        row.update(tokens_per_s=B * T / med * 1e3, step_ms=med, steps=len(ms))
    if mem:
        row["peak_mib"] = float(mem[-1])
    if alloc:
        row["alloc_mib"] = float(sum(alloc))
    if not ms:
        row["error"] = text[-400:]
    return row


def main(argv):
    if len(argv) == 7 and argv[0] == "flashtrain":
        row = flashtrain(*argv[1:])
    elif len(argv) == 4 and argv[0] == "llmc":
        row = llmc(*argv[1:])
    else:
        sys.exit(__doc__)
    print(json.dumps(row))


if __name__ == "__main__":
    main(sys.argv[1:])
