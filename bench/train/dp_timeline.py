"""Per-GPU kernel timeline of a data-parallel run (bench/train/dp_profile.sh's nsys export).

Over the second half of the run (after start-up and graph capture), for each GPU: wall time per
step, the time some kernel runs (busy), the NCCL kernels' time and how much of it other kernels
overlap, and the idle gaps by length. Steps are counted from the kernel that runs once per step
with the most launches equal to STEPS (the optimizer's), so no NVTX ranges are needed.
  python3 dp_timeline.py RUN.sqlite STEPS
"""
import sqlite3
import sys
from collections import Counter, defaultdict


def union_length(intervals):
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def main():
    db, steps = sys.argv[1], int(sys.argv[2])
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT k.deviceId, k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON k.shortName = s.id").fetchall()
    by_dev = defaultdict(list)
    for d, s, e, name in rows:
        by_dev[d].append((s, e, name))
    for d, ks in sorted(by_dev.items()):
        ks.sort()
        counts = Counter(n for _, _, n in ks)
        # A kernel launched once per optimizer step: AdamW's (name contains "adamw"), else the rarest
        # kernel launched at least STEPS times.
        marker = next((n for n in counts if "adamw" in n.lower()), None)
        starts = [s for s, _, n in ks if n == marker]
        if len(starts) < 4:
            print(f"GPU {d}: no per-step marker kernel found")
            continue
        half = starts[len(starts) // 2:]
        t0, t1 = half[0], half[-1]
        nsteps = len(half) - 1
        win = [(max(s, t0), min(e, t1), n) for s, e, n in ks if e > t0 and s < t1]
        busy = union_length([(s, e) for s, e, _ in win])
        nccl = [(s, e) for s, e, n in win if "nccl" in n.lower()]
        comp = [(s, e) for s, e, n in win if "nccl" not in n.lower()]
        nccl_t = union_length(nccl)
        comp_t = union_length(comp)
        both = nccl_t + comp_t - busy  # time both kinds run at once
        wall = t1 - t0
        # Idle gaps between consecutive busy stretches.
        gaps, end = [], None
        for s, e in sorted((s, e) for s, e, _ in win):
            if end is not None and s > end:
                gaps.append(s - end)
            end = e if end is None else max(end, e)
        big = sorted(gaps, reverse=True)[:5]
        per = lambda x: x / nsteps / 1e6
        print(f"GPU {d}: {nsteps} steps, {per(wall):.2f} ms/step wall, busy {per(busy):.2f}, "
              f"compute kernels {per(comp_t):.2f}, NCCL kernels {per(nccl_t):.2f} "
              f"(of which under compute {per(both):.2f}), idle {per(wall - busy):.2f} ms/step; "
              f"gaps > 50 us: {sum(1 for g in gaps if g > 5e4) / nsteps:.1f}/step, "
              f"largest {', '.join(f'{g / 1e6:.2f}' for g in big)} ms; marker {marker}")
        top = Counter()
        for s, e, n in win:
            if "nccl" in n.lower():
                top[n] += e - s
        for n, t in top.most_common(3):
            print(f"   {n[:80]}: {per(t):.2f} ms/step")


if __name__ == "__main__":
    main()
