#!/usr/bin/env bash
# compute-sanitizer over a small flash attention forward + backward (every kernel path:
# bench/attention/sanitize_attention.cpp): memcheck, racecheck, synccheck and initcheck must
# report nothing. Needs a GPU and a CUDA build (FT_CUDA), e.g. build-gpu from scripts/gpu_check.sh.
#   scripts/attention_sanitize.sh [build-dir] [--quick]   (exit 0 only when every tool is clean)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
quick=${2:-}
bin=$build/bench/attention/sanitize_attention
[ -x "$bin" ] || { echo "attention_sanitize: $bin not built (cmake --build $build --target sanitize_attention)" >&2; exit 2; }
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$cs" ] || { echo "attention_sanitize: compute-sanitizer not found (CUDA toolkit)" >&2; exit 2; }
status=0
for tool in memcheck racecheck synccheck initcheck; do
  t0=$(date +%s)
  log=$(mktemp)
  extra=()
  [ "$tool" = racecheck ] && extra=(--racecheck-report all)
  timeout "${SANITIZE_TIMEOUT:-300}" "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 3 "$bin" $quick >"$log" 2>&1
  rc=$?
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
  cases=$(grep -c '^ok ' "$log")
  echo "$tool: rc=$rc, $cases cases, ${summary:-no summary}, $(( $(date +%s) - t0 )) s"
  if [ $rc -ne 0 ]; then
    status=1
    grep -vE '^ok ' "$log" | head -40
  fi
  rm -f "$log"
done
exit $status
