#!/usr/bin/env bash
# Session 23 (issues 17, 20): the step of two flashtrain builds side by side in one call -- the
# commit before (BASE) and this tree (NEW) -- on one GPU and, where the machine has two, as two
# ZeRO-1 ranks; interleaved, ROUNDS times, FLASHTRAIN_STEP_TIMING's ms a step per run. Then one
# traced run of each on GPU 0 (bench/profile/kernel_trace.cpp), compared with
# kernel_trace_summary.py gaps: where the time between and inside the graph replays went.
#   BASE=build-base/flashtrain NEW=build-gpu/flashtrain TRACE_LIB=build-gpu/bench/profile/libft_kernel_trace.so \
#     bench/train/dev/step_ab_call.sh        (ROUNDS, default 2; STEPS, default 100; .gpu/kjv carried)
# BASE_ENV / NEW_ENV: VAR=VALUE words added to that side's environment (one binary, two settings).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
[ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
data=${KJV_DIR:-.gpu/kjv}
out=${OUT:-/tmp/step-ab}
mkdir -p "$out"
source bench/train/gpt2_dp_args.sh
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
run() {  # LABEL BINARY NPROC [env ...]: one run, its step timing and last tokens/s line
  local r=/tmp/ab-$1-$RANDOM nproc=()
  [ "$3" -gt 1 ] && nproc=(--nproc "$3") || nproc=()
  gpt2_dp_args "${STEPS:-100}" 50 "$r" "$data"
  env "${@:4}" FLASHTRAIN_STEP_TIMING=1 timeout 200 "$2" train configs/gpt2-small.yaml "${nproc[@]}" \
    "${GPT2_DP_ARGS[@]}" --set compile_model=true --set zero1="$([ "$3" -gt 1 ] && echo true || echo false)" 2>&1 |
    grep -E "step timing|tok/s|rror" | grep -v "rank 1" | tail -2 | sed "s/^/$1: /"
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  for which in base new; do
    bin=$BASE side_env=(${BASE_ENV:-}); [ $which = new ] && bin=$NEW side_env=(${NEW_ENV:-})
    run "$which-1gpu-$round" "$bin" 1 CUDA_VISIBLE_DEVICES=0 "${side_env[@]}"
    [ "$gpus" -ge 2 ] && run "$which-2gpu-zero1-$round" "$bin" 2 "${side_env[@]}"
  done
done
if [ -n "${TRACE_LIB:-}" ]; then
  lib=$(realpath "$TRACE_LIB")
  for which in base new; do
    bin=$BASE side_env=(${BASE_ENV:-}); [ $which = new ] && bin=$NEW side_env=(${NEW_ENV:-})
    rm -rf "/tmp/trace-$which"
    STEPS=60 run "$which-traced" "$bin" 1 CUDA_VISIBLE_DEVICES=0 CUDA_INJECTION64_PATH="$lib" FT_KERNEL_TRACE_DIR=/tmp/trace-$which "${side_env[@]}"
  done
  python3 bench/profile/kernel_trace_summary.py gaps /tmp/trace-base/trace-*.tsv /tmp/trace-new/trace-*.tsv --top 8 |
    tee "$out/gaps-base-vs-new.md"
  (cd /tmp && tar cJf "$out/ab-traces.tar.xz" trace-base trace-new)
fi
