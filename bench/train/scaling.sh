#!/usr/bin/env bash
# Issue 7's scaling benchmark: GPT-2-small (configs/gpt2-small.yaml), T = 1024, B = 16 per GPU, one
# micro-batch per step, bf16, eval off, on 1 GPU and on N GPUs (`--nproc N`), ZeRO-1 off and on,
# plus N GPUs with the bucket overlap turned off (FLASHTRAIN_DP_OVERLAP=0) to show what the overlap
# gains, and N GPUs with compile_model (CUDA-graph replay; buckets then sync after the replay).
# tokens/s is the median of the per-interval rates in rank 0's metrics.jsonl after warm-up (the
# first interval holds start-up and, with compile_model, the capture). peak_mib is rank 0's
# caching-allocator peak ("peak device memory" of the final line). The run's own final checkpoint
# is written after the last timed interval; ZeRO-1 gathers it chunk-wise on the host.
# Writes OUT_DIR/scaling-rows.jsonl and, via bench/train/scaling_summary.py,
# bench/results/scaling-<card>.json and .md (when RESULTS_DIR is set: there instead).
#   bench/train/scaling.sh BUILD_DIR DATA_DIR OUT_DIR [N_GPUS (default: all)] [STEPS (default 150)]
set -uo pipefail
build=${1:?build dir}; data=${2:?data dir}; outdir=${3:?out dir}
ngpu=${4:-$(nvidia-smi -L | wc -l)}; steps=${5:-150}
export NCCL_NVLS_ENABLE=0
mkdir -p "$outdir"
rows=$outdir/scaling-rows.jsonl
: > "$rows"

run() {  # run GPUS ZERO1 OVERLAP COMPILE
  local n=$1 z=$2 ov=$3 cm=$4
  local tag=g$n-z$z-o$ov-c$cm
  local run=/tmp/ft-scaling-$tag
  rm -rf "$run"
  local nproc=(); [ "$n" -gt 1 ] && nproc=(--nproc "$n")
  FLASHTRAIN_DP_OVERLAP=$ov timeout 420 "$build/flashtrain" train configs/gpt2-small.yaml "${nproc[@]}" \
    --set max_seq_len=1024 --set batch_size=16 --set gradient_accumulation_steps=1 --set max_steps="$steps" \
    --set log_interval=5 --set eval_interval=0 --set checkpoint_interval=0 --set keep_checkpoints=1 \
    --set mixed_precision=bf16 --set zero1="$z" --set compile_model="$cm" --set device=cuda \
    --set out_dir="$run" --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" > "$run.log" 2>&1
  local rc=$?
  echo "== gpus=$n zero1=$z overlap=$ov compile_model=$cm (rc $rc)"; grep -E "data parallel|done:|error" "$run.log" | tail -3
  python3 - "$run/metrics.jsonl" "$run.log" "$n" "$z" "$ov" "$cm" "$rc" >> "$rows" <<'PY'
import json, re, statistics, sys
metrics, log, n, z, ov, cm, rc = sys.argv[1:]
try:
    steps = [json.loads(l) for l in open(metrics) if '"tokens_per_s"' in l]
except OSError:
    steps = []
timed = [s["tokens_per_s"] for s in steps if s["step"] > 10] or [s["tokens_per_s"] for s in steps[1:]]
peak = re.findall(r"peak device memory ([0-9.]+) MiB", open(log).read())
tps = statistics.median(timed) if timed and rc == "0" else None
print(json.dumps({"gpus": int(n), "zero1": z == "true", "overlap": ov == "1", "compile_model": cm == "true",
                  "tokens_per_s": tps, "step_ms": 1000 * int(n) * 16 * 1024 / tps if tps else None,
                  "peak_mib": float(peak[-1]) if peak else None, "rc": int(rc)}))
PY
}

for z in false true; do run 1 "$z" 1 false; done
if [ "$ngpu" -gt 1 ]; then
  for z in false true; do run "$ngpu" "$z" 1 false; done
  run "$ngpu" false 0 false   # no overlap: all buckets after the backward pass
  run 1 false 1 true          # compile_model, 1 GPU and N GPUs
  run "$ngpu" false 1 true
fi
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
python3 bench/train/scaling_summary.py "$rows" --card "$card" --results "${RESULTS_DIR:-bench/results}" | tee "$outdir/scaling-table.md"
