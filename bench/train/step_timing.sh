#!/usr/bin/env bash
# Where a GPT-2-small training step's GPU time goes, on 1 and N GPUs (issues 17 and 20): runs
# `flashtrain train` with FLASHTRAIN_STEP_TIMING=1 (train/step_timer.h: CUDA events around the
# micro-steps, the exposed gradient all-reduce and the optimizer, and the GPU's idle time before
# each step) at T = 1024, B = 16 per GPU, and prints rank 0's per-phase means for each run.
#   bench/train/step_timing.sh BUILD_DIR DATA_DIR OUT_DIR [N_GPUS (2)] [STEPS (60)] [extra --set args...]
set -uo pipefail
build=${1:?build dir}; data=${2:?data dir}; outdir=${3:?out dir}; n=${4:-2}; steps=${5:-60}
shift $(( $# < 5 ? $# : 5 ))
export NCCL_NVLS_ENABLE=0 FLASHTRAIN_STEP_TIMING=1
mkdir -p "$outdir"
run_one() {  # run_one GPUS GRAD_DTYPE COMPILE
  local g=$1 gd=$2 cm=$3 run=$outdir/st-g$1-$2-c$3
  local nproc=(); [ "$g" -gt 1 ] && nproc=(--nproc "$g")
  rm -rf "$run"
  timeout 240 "$build/flashtrain" train configs/gpt2-small.yaml "${nproc[@]}" \
    --set max_seq_len=1024 --set batch_size=16 --set gradient_accumulation_steps=1 --set max_steps="$steps" \
    --set log_interval=10 --set eval_interval=0 --set checkpoint_interval=0 --set keep_checkpoints=1 \
    --set mixed_precision=bf16 --set device=cuda --set compile_model="$cm" --set grad_reduce_dtype="$gd" \
    --set out_dir="$run" --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" "${extra[@]}" \
    > "$run.log" 2>&1
  echo "== gpus=$g grad_dtype=$gd compile_model=$cm (rc $?): $(grep -m1 'done:' "$run.log" | sed 's/.*loss [^,]*, //')"
  grep "step timing" "$run.log" | sed 's/^flashtrain: /   /'
  rm -rf "$run"
}
extra=("$@")
run_one 1 fp32 true
run_one 1 fp32 false
if [ "$n" -gt 1 ]; then
  run_one "$n" fp32 true
  run_one "$n" bf16 true
  run_one "$n" fp32 false
fi
