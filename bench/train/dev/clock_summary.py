#!/usr/bin/env python3
"""Issue 20, session 22: summarise an nvidia-smi log taken during one run (pair_probe_call.sh
PROBE=clocks) -- per GPU, over the busy samples (utilization >= 90%): mean SM clock, mean power,
and the fraction of samples with the software power cap active. If a coupled rank's backward is
slower than its card alone because its card runs at a lower clock (both cards sit at the power cap
in this step, session 14), these means show it.
  clock_summary.py LABEL LOG   (LOG: nvidia-smi --query-gpu=index,utilization.gpu,clocks.sm,
                                power.draw,clocks_event_reasons.sw_power_cap --format=csv,noheader,nounits -lms N)
"""
import sys
from collections import defaultdict

label, path = sys.argv[1], sys.argv[2]
gpus = defaultdict(list)
for line in open(path):
    f = [x.strip() for x in line.split(",")]
    if len(f) < 5:
        continue
    try:
        idx, util, sm, pw = int(f[0]), float(f[1]), float(f[2]), float(f[3])
    except ValueError:
        continue
    if util >= 90:
        gpus[idx].append((sm, pw, f[4].lower() == "active"))
out = []
for idx in sorted(gpus):
    s = gpus[idx]
    n = len(s)
    out.append(f"GPU {idx}: {n} busy samples, SM {sum(x[0] for x in s) / n:.0f} MHz, "
               f"{sum(x[1] for x in s) / n:.0f} W, power cap active in {100 * sum(x[2] for x in s) / n:.0f}%")
print(f"{label} clocks: " + ("; ".join(out) if out else "no busy samples"))
