#!/usr/bin/env bash
# Kernel times under Nsight Compute: the median gpu__time_duration over 3 calls of each kernel whose
# name matches REGEX, one line per configuration (the method of bench/results/attention-s32-h200.md;
# ncu locks the clocks, so compare lines of one run, not against stream timing).
#   bench/attention/dev/ncu_times.sh LIB REGEX "D T VARIANT [profile_attention.py options]" ...
# e.g. ncu_times.sh build/bench/attention/libft_attention.so flash_fwd "128 4096 49" "128 4096 64" \
#        "128 4096 49 --full --tokens 16384 --hidden 2048"
# VARIANT: attention_capi.cu's variants (0: the dispatch; 49 / 58: the ws forward at D = 128 / 64 one
# CTA a block; 64: its persistent form). Add --backward (and a flash_bwd regex) for the backward.
set -u
lib=${1:?libft_attention.so}; regex=${2:?kernel name regex}; shift 2
here=$(dirname "$0")
for cfg in "$@"; do
  # shellcheck disable=SC2086
  ncu --metrics gpu__time_duration.sum --csv -k regex:"$regex" \
    python3 "$here/profile_attention.py" "$lib" $cfg --repeat 3 2>/dev/null | python3 -c '
import collections, csv, sys
rows = list(csv.reader(l for l in sys.stdin if l.startswith("\"")))
if not rows:
    sys.exit(print(sys.argv[1] + ": no kernel matched (or ncu failed)"))
name, value = rows[0].index("Kernel Name"), rows[0].index("Metric Value")
times = collections.OrderedDict()
for r in rows[1:]:
    times.setdefault(r[name].split("<")[0].split("(")[0].replace("void ", ""), []).append(float(r[value].replace(",", "")) / 1e3)
print(sys.argv[1] + ":", "  ".join("%s %.1f" % (k, sorted(v)[len(v) // 2]) for k, v in times.items()), "us")
' "$cfg"
done
