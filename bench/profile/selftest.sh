#!/usr/bin/env bash
# Checks the kernel tracer (kernel_trace.cpp) on a GPU: runs trace_selftest under it and compares the
# trace with what the program launched -- graph replays and kernels per replay counted exactly, the
# eager launches outside the graphs, and each kernel's mean traced duration within 10% of the same
# kernel timed by CUDA events in the program -- then prints kernel_trace_summary.py's table of it.
#   bench/profile/selftest.sh [BUILD_DIR]   (default build-gpu; targets ft_kernel_trace, trace_selftest)
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
lib=$build/bench/profile/libft_kernel_trace.so
prog=$build/bench/profile/trace_selftest
for f in "$lib" "$prog"; do
  [ -e "$f" ] || { echo "selftest: $f is not built (cmake --build $build --target ft_kernel_trace trace_selftest)"; exit 2; }
done
dir=$(mktemp -d)
expect=$(CUDA_INJECTION64_PATH=$(realpath "$lib") FT_KERNEL_TRACE_DIR=$dir "$prog") || { echo "selftest: $prog failed"; exit 1; }
echo "$expect"
trace=$(ls "$dir"/trace-*.tsv 2>/dev/null | head -1)
[ -n "$trace" ] || { echo "selftest: FAIL: no trace written in $dir (was the library loaded?)"; exit 1; }
python3 - "$trace" "$expect" <<'PY' || exit 1
import collections, statistics, sys
path, expect = sys.argv[1], dict(kv.split("=") for kv in sys.argv[2].split()[1:])
rows = [l.rstrip("\n").split("\t", 7) for l in open(path)][1:]
graph = [r for r in rows if r[2] != "0" and r[1] == "K"]
eager = [r for r in rows if r[2] == "0" and r[1] == "K"]
def name_has(r, s): return s in r[7]
replays = len({r[3] for r in graph})
checks = [
    ("graph replays", replays, int(expect["graph_replays"])),
    ("spin_a per replay", sum(name_has(r, "spin_a") for r in graph) / max(replays, 1), float(expect["a_per_replay"])),
    ("spin_b per replay", sum(name_has(r, "spin_b") for r in graph) / max(replays, 1), float(expect["b_per_replay"])),
    ("spin_a outside graphs", sum(name_has(r, "spin_a") for r in eager), int(expect["eager_a"])),
    ("spin_b outside graphs", sum(name_has(r, "spin_b") for r in eager), int(expect["eager_b"])),
]
ok = True
for what, got, want in checks:
    good = got == want
    ok &= good
    print(f"selftest: {what}: {got} (expected {want}) {'ok' if good else 'FAIL'}")
for k in ("a", "b"):
    d = [(int(r[5]) - int(r[4])) / 1e3 for r in rows if r[1] == "K" and f"spin_{k}" in r[7]]
    traced, timed = statistics.fmean(d), float(expect[f"{k}_us"])
    good = abs(traced / timed - 1) <= 0.10
    ok &= good
    print(f"selftest: spin_{k} mean duration traced {traced:.2f} us, timed by events {timed:.2f} us {'ok' if good else 'FAIL'}")
print("selftest: PASS" if ok else "selftest: FAIL")
sys.exit(0 if ok else 1)
PY
python3 bench/profile/kernel_trace_summary.py summary "$trace" --skip 0
