#!/usr/bin/env bash
# One device call on 2 GPUs for issue 20's open question (why overlapping the gradient sum with the
# backward costs about what it hides; bench/train/NOTES.md): bench/train/overlap_probe.py under
# torchrun with NCCL's default CTA count and with NCCL_MAX_CTAS = 8 and 2 (fewer SMs taken by the
# collective kernels), and in one process with peer copies (copy engines only); then, if time is
# left, scripts/gpu_dist_check.sh build test (the data-parallel tests). Logs to $OUT.
# Usage (repo root, on a machine with 2+ GPUs, .gpu carried): bench/train/dev/overlap_probe_call.sh
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/overlap_probe_call}; mkdir -p "$OUT"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
{
  for ctas in default 8 2; do
    echo "=== torchrun 2 ranks, NCCL_MAX_CTAS=$ctas"
    if [ $ctas = default ]; then
      timeout 120 torchrun --nproc_per_node 2 bench/train/overlap_probe.py
    else
      NCCL_MAX_CTAS=$ctas NCCL_MIN_CTAS=1 timeout 120 torchrun --nproc_per_node 2 bench/train/overlap_probe.py
    fi
  done
  echo "=== one process, peer copies"
  timeout 120 python3 bench/train/overlap_probe.py
} > "$OUT/probe.log" 2>&1
grep -E "^#|^\| |===" "$OUT/probe.log"
OUT=$OUT timeout 470 scripts/gpu_dist_check.sh build test
