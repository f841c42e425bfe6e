#!/usr/bin/env python3
"""Tables from bench/profile/kernel_trace.cpp's traces (trace-<pid>.tsv).

  kernel_trace_summary.py summary TRACE[:DEVICE] [--skip N] [--top K] [--parts] [--step-marker RE]
      Per kernel (and copy kind) of the graph replays of one device: calls per replay, mean us a
      call, ms per replay, and the replays' sum. The first N replays (default 10: capture, warm-up)
      are left out. Without graph replays (an eager program) it reports per call over the whole run.
      --step-marker RE counts per training step instead, graph or not: a step starts at each kernel
      whose name matches RE (one that runs once a step: llm.c's encoder_forward_kernel3, our
      cross_entropy_loss_and_grad; our embedding_forward_kernel runs twice, wte and wpe), the
      first N steps and whatever follows the last marker are left out, and everything in between
      (replays, the eager optimizer) is divided by the steps counted. This puts an eager program
      (llm.c) and flashtrain's graph replays plus its optimizer phase on the same footing.
  kernel_trace_summary.py compare A[:DEVICE] B[:DEVICE] [--skip N] [--top K] [--parts] [--step-marker RE [RE_B]]
      The same for two traces side by side (e.g. a coupled rank against the same card alone):
      ms per replay in A and B, the difference, the ratio, sorted by the difference; and how much of
      the total difference the kernels that are uniformly slower by the median ratio explain.
      With --step-marker, per step (a second RE for B when the two programs' markers differ).
  kernel_trace_summary.py gaps A[:DEVICE] [B[:DEVICE]] [--skip N] [--top K]
      Where a step's time goes besides the kernels themselves: per graph replay its span, the time
      kernels and memsets cover, the idle rest (launch gaps, a copy the stream waits for, a wait in
      a collective kernel counts as busy), and the time between replays (the eager optimizer phase,
      the host's own latency) split the same way; then the K largest idle gaps inside a replay
      (mean over replays, by position) and what runs between replays. With B, both side by side.
  --parts groups the kernels by part of the training step first, as bench/train/step_profile.py does
      for Nsight Compute's serialised timings (its rules; copies on the copy engines as their own part).

A replay is one graph launch: its kernel nodes share the launch's correlation id. DEVICE picks the
device of a trace with several (default: the device with the most records). Only the records of
the graph with the most records are used when the trace has graphs (flashtrain's compiled
micro-step); the eager optimizer and the warm-up steps are then left out by construction.
"""
import argparse
import bisect
import collections
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
from step_profile import classify  # noqa: E402  (the step profile's part rules)


def part_of(name):
    return "copies (copy engines)" if name.startswith("copy ") else classify(name)


def by_part(table):
    """{part: (calls per replay, mean us, ms per replay)} from a per-kernel table."""
    acc = collections.defaultdict(lambda: [0.0, 0.0])
    for name, (calls, _, ms) in table.items():
        part = acc[part_of(name)]
        part[0] += calls
        part[1] += ms
    return {p: (c, 1e3 * ms / c if c else 0.0, ms) for p, (c, ms) in acc.items()}


def short(name, width=90):
    # Template arguments say which instantiation; keep them but cut very long names.
    name = re.sub(r"\s+", " ", name)
    return name if len(name) <= width else name[: width - 3] + "..."


def load(spec):
    path, _, dev = spec.partition(":")
    rows = []
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        if header[:3] != ["device", "kind", "graph"]:
            sys.exit(f"{path}: not a kernel_trace.cpp trace (header {header[:3]})")
        for line in f:
            d, kind, graph, corr, start, end, nbytes, name = line.rstrip("\n").split("\t", 7)
            rows.append((int(d), kind, int(graph), int(corr), int(start), int(end), int(nbytes), name))
    if not rows:
        sys.exit(f"{path}: no records")
    if dev:
        device = int(dev)
    else:
        device = collections.Counter(r[0] for r in rows).most_common(1)[0][0]
    rows = [r for r in rows if r[0] == device]
    if not rows:
        sys.exit(f"{path}: no records on device {device}")
    return path, device, rows


def graph_replays(rows):
    """The graph with the most records, its records by replay ({correlation id: records in start
    order}), and the replays in the order they ran; (None, {}, []) for a trace without graphs."""
    counts = collections.Counter(r[2] for r in rows if r[2] != 0)
    if not counts:
        return None, {}, []
    main_graph = counts.most_common(1)[0][0]
    reps = collections.defaultdict(list)
    for r in sorted((r for r in rows if r[2] == main_graph), key=lambda r: r[4]):
        reps[r[3]].append(r)
    return main_graph, reps, sorted(reps, key=lambda c: reps[c][0][4])


def per_step(rows, skip, marker):
    """per_replay's table per training step: steps start at the records whose name matches the
    regex `marker`; the first `skip` steps and the records after the last marker are left out."""
    rx = re.compile(marker)
    rows = sorted(rows, key=lambda r: r[4])
    starts = [r[4] for r in rows if r[1] == "K" and rx.search(r[7])]
    if len(starts) <= skip + 1:
        sys.exit(f"--step-marker {marker!r}: {len(starts)} marker kernels, too few for a step after --skip {skip}")
    lo, hi = starts[skip], starts[-1]
    used = [r for r in rows if lo <= r[4] < hi]
    n = len(starts) - 1 - skip
    return table_of(used, n), n, f"steps (marker {marker!r})"


def table_of(used, n):
    durations = collections.defaultdict(list)
    for r in used:
        durations[r[7]].append((r[5] - r[4]) / 1e3)  # us
    return {name: (len(d) / n, statistics.fmean(d), sum(d) / n / 1e3) for name, d in durations.items()}


def per_replay(rows, skip, marker=None):
    """{name: (calls per replay, mean us, ms per replay)}, replays counted, and the mode used."""
    if marker:
        return per_step(rows, skip, marker)
    main_graph, reps, order = graph_replays(rows)
    if reps:
        # The graph with the most records (flashtrain's micro-step); others are reported, not mixed in.
        others = collections.Counter(r[2] for r in rows if r[2] not in (0, main_graph))
        if others:
            print(f"# graph {main_graph} used; other graphs left out (records): {dict(others)}")
        if len(order) <= skip:
            sys.exit(f"only {len(order)} graph replays, fewer than --skip {skip}")
        used = [r for c in order[skip:] for r in reps[c]]
        n = len(order) - skip
        mode = "graph replays"
    else:
        used, n, mode = rows, 1, "whole run (no graph replays)"
    return table_of(used, n), n, mode


def print_summary(spec, skip, top, parts=False, marker=None):
    path, device, rows = load(spec)
    table, n, mode = per_replay(rows, skip, marker)
    if parts:
        table = by_part(table)
    total = sum(v[2] for v in table.values())
    print(f"# {path}, device {device}: {n} {mode} (after {skip} left out); {total:.3f} ms of kernels and copies a replay")
    print()
    print(f"| {'part' if parts else 'kernel'} | calls / replay | mean us | ms / replay | % |")
    print("|---|---|---|---|---|")
    for name, (calls, mean, ms) in sorted(table.items(), key=lambda kv: -kv[1][2])[:top]:
        print(f"| `{short(name)}` | {calls:.2f} | {mean:.2f} | {ms:.4f} | {100 * ms / total:.1f} |")


def print_compare(spec_a, spec_b, skip, top, parts=False, markers=()):
    path_a, dev_a, rows_a = load(spec_a)
    path_b, dev_b, rows_b = load(spec_b)
    marker_a = markers[0] if markers else None
    marker_b = markers[-1] if markers else None
    a, na, mode_a = per_replay(rows_a, skip, marker_a)
    b, nb, mode_b = per_replay(rows_b, skip, marker_b)
    if parts:
        a, b = by_part(a), by_part(b)
    names = set(a) | set(b)
    ta, tb = sum(v[2] for v in a.values()), sum(v[2] for v in b.values())
    print(f"# A: {path_a} device {dev_a}, {na} {mode_a}; B: {path_b} device {dev_b}, {nb} {mode_b}")
    print(f"# ms of kernels and copies a replay: A {ta:.3f}, B {tb:.3f}, A - B {ta - tb:+.3f} ({100 * (ta / tb - 1):+.2f}%)")
    both = [n for n in names if n in a and n in b and b[n][2] > 0]
    ratios = [a[n][2] / b[n][2] for n in both]
    weights = [b[n][2] for n in both]
    if ratios:
        med = statistics.median(ratios)
        uniform = sum(w * (med - 1) for w in weights)
        print(f"# median ratio A / B over {len(both)} kernels in both: {med:.4f}; a uniform slow-down by it "
              f"explains {uniform:+.3f} of the {ta - tb:+.3f} ms")
    only = [n for n in names if n not in a or n not in b]
    if only:
        print(f"# in one trace only: {len(only)} kernels, A {sum(a[n][2] for n in only if n in a):.3f} ms, "
              f"B {sum(b[n][2] for n in only if n in b):.3f} ms")
    print()
    print(f"| {'part' if parts else 'kernel'} | calls / replay A, B | ms / replay A | B | A - B | A / B |")
    print("|---|---|---|---|---|---|")
    rows = []
    for n in names:
        ma, mb = a.get(n, (0, 0, 0.0)), b.get(n, (0, 0, 0.0))
        rows.append((ma[2] - mb[2], n, ma, mb))
    for diff, n, ma, mb in sorted(rows, key=lambda r: -abs(r[0]))[:top]:
        ratio = f"{ma[2] / mb[2]:.3f}" if mb[2] > 0 else "-"
        print(f"| `{short(n)}` | {ma[0]:.2f}, {mb[0]:.2f} | {ma[2]:.4f} | {mb[2]:.4f} | {diff:+.4f} | {ratio} |")


def union_us(intervals):
    """Microseconds covered by [(start_ns, end_ns)]."""
    total, cur = 0, None
    for s0, e0 in sorted(intervals):
        if cur is None or s0 > cur[1]:
            if cur:
                total += cur[1] - cur[0]
            cur = [s0, e0]
        else:
            cur[1] = max(cur[1], e0)
    return (total + (cur[1] - cur[0] if cur else 0)) / 1e3


def replay_gaps(rows, skip):
    """Per-replay means (us) of span, busy, idle and of the interval to the next replay, the mean
    idle gap before each position of a replay, and the mean time per name between replays."""
    main_graph, reps, order = graph_replays(rows)
    if not reps:
        sys.exit("gaps: the trace has no graph replays")
    if len(order) <= skip + 1:
        sys.exit(f"gaps: only {len(order)} graph replays, too few after --skip {skip}")
    order = order[skip:]
    span, busy, between, between_busy = [], [], [], []
    at_position = collections.defaultdict(list)
    names = {}
    between_names = collections.defaultdict(float)
    others = sorted((r for r in rows if r[2] != main_graph), key=lambda r: r[4])
    other_starts = [r[4] for r in others]
    for i, c in enumerate(order):
        rs = reps[c]
        start, end = rs[0][4], max(r[5] for r in rs)
        work = [(r[4], r[5]) for r in rs if r[1] in "KM"]
        span.append((end - start) / 1e3)
        busy.append(union_us(work))
        reach = rs[0][5]
        for k, r in enumerate(rs[1:], 1):  # the idle time before each record, by its position
            at_position[k].append(max(0, r[4] - reach) / 1e3)
            names[k] = (rs[k - 1][7], r[7])
            reach = max(reach, r[5])
        if i + 1 < len(order):
            nxt = min(r[4] for r in reps[order[i + 1]])
            mid = others[bisect.bisect_left(other_starts, end):bisect.bisect_left(other_starts, nxt)]
            between.append((nxt - end) / 1e3)
            between_busy.append(union_us([(r[4], min(r[5], nxt)) for r in mid]))
            for r in mid:
                between_names[r[7]] += (r[5] - r[4]) / 1e3
    n = len(between)
    stats = {"replay span": statistics.fmean(span), "  kernels + memsets busy": statistics.fmean(busy)}
    stats["  idle inside the replay"] = stats["replay span"] - stats["  kernels + memsets busy"]
    stats["between replays"] = statistics.fmean(between)
    stats["  busy between"] = statistics.fmean(between_busy)
    stats["  idle between"] = stats["between replays"] - stats["  busy between"]
    stats["step (span + between)"] = stats["replay span"] + stats["between replays"]
    gaps = {k: (statistics.fmean(v), names[k]) for k, v in at_position.items()}
    return stats, gaps, {k: v / n for k, v in between_names.items()}, len(order)


def print_gaps(spec_a, spec_b, skip, top):
    specs = [spec_a] + ([spec_b] if spec_b else [])
    results = []
    for spec in specs:
        path, device, rows = load(spec)
        results.append((path, device) + replay_gaps(rows, skip))
    for path, device, _, _, _, n in results:
        print(f"# {path}, device {device}: {n} graph replays after {skip} left out")
    print()
    head = " | ".join(f"{'A' if i == 0 else 'B'} us" for i in range(len(results)))
    print(f"| per step | {head} |" + (" A - B |" if len(results) == 2 else ""))
    print("|---|" + "---|" * (len(results) + (len(results) == 2)))
    for key in results[0][2]:
        vals = [r[2][key] for r in results]
        diff = f" {vals[0] - vals[1]:+.1f} |" if len(vals) == 2 else ""
        print(f"| {key} | " + " | ".join(f"{v:.1f}" for v in vals) + " |" + diff)
    for path, device, _, gaps, between, _ in results:
        print(f"\n{path}: largest idle gaps inside a replay (mean us, by position)\n")
        print("| position | idle us | after | before |")
        print("|---|---|---|---|")
        for k, (us, (a, b)) in sorted(gaps.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"| {k} | {us:.1f} | `{short(a, 60)}` | `{short(b, 60)}` |")
        print(f"\n{path}: between replays (mean us a step)\n")
        print("| work | us |")
        print("|---|---|")
        for name, us in sorted(between.items(), key=lambda kv: -kv[1])[:top]:
            print(f"| `{short(name, 80)}` | {us:.1f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary")
    s.add_argument("trace")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    g = sub.add_parser("gaps")
    g.add_argument("a")
    g.add_argument("b", nargs="?")
    for q in (s, c, g):
        q.add_argument("--skip", type=int, default=10, help="graph replays left out at the start")
        q.add_argument("--top", type=int, default=30, help="rows printed")
    for q in (s, c):
        q.add_argument("--parts", action="store_true", help="group the kernels by part of the step")
    s.add_argument("--step-marker", help="count per training step, a step starting at each kernel matching this regex")
    c.add_argument("--step-marker", nargs="+", metavar="RE", help="the same; a second regex for B")
    args = p.parse_args()
    if args.cmd == "gaps":
        print_gaps(args.a, args.b, args.skip, args.top)
    elif args.cmd == "summary":
        print_summary(args.trace, args.skip, args.top, args.parts, args.step_marker)
    else:
        if args.step_marker and len(args.step_marker) > 2:
            p.error("--step-marker takes one regex, or two (A's, then B's)")
        print_compare(args.a, args.b, args.skip, args.top, args.parts, args.step_marker or ())


if __name__ == "__main__":
    main()
