#!/usr/bin/env bash
# Issue 17's missing bar (T = 1024, B = 16, dropout 0: flashtrain >= 1.10x llm.c) asks where llm.c's
# step is faster than ours, part by part. One call on one GPU, every run on the same card:
#   1. llm.c (cuDNN attention, bench/train/llmc_run.sh's recipe) and flashtrain at dropout 0
#      (deterministic, and atomic dQ), each once untraced (tokens/s) and once under the kernel
#      tracer (bench/profile/kernel_trace.cpp);
#   2. kernel_trace_summary.py per training step (--step-marker: a kernel that runs once a step --
#      llm.c's encoder_forward_kernel3, our cross_entropy_loss_and_grad_kernel; our
#      embedding_forward_kernel runs twice, for wte and wpe), grouped by part and kernel by kernel.
# Usage (repo root, .gpu/kjv .gpu/bpe .gpu/llmc carried, flashtrain and ft_kernel_trace built in BUILD):
#   BUILD=build-gpu bench/train/dev/llmc_trace_call.sh        (OUT: where the tables go)
set -uo pipefail
cd "$(dirname "$0")/../../.."
[ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
build=${BUILD:-build-gpu}
out=${OUT:-/tmp/llmc-trace}
mkdir -p "$out"
lib=$(realpath "$build/bench/profile/libft_kernel_trace.so") || exit 1
data=${KJV_DIR:-.gpu/kjv}
source bench/train/gpt2_dp_args.sh
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
ft() {  # LABEL DETERMINISTIC [env ...]: one flashtrain run at dropout 0, its last tokens/s line
  local r=/tmp/ft-$1-$RANDOM
  gpt2_dp_args 60 10 "$r" "$data"
  env "${@:3}" FLASHTRAIN_STEP_TIMING=1 timeout 200 "$build/flashtrain" train configs/gpt2-small.yaml \
    "${GPT2_DP_ARGS[@]}" --set compile_model=true --set dropout=0 --set deterministic="$2" 2>&1 |
    grep -E "step timing|tok/s|rror" | tail -2 | sed "s/^/flashtrain $1: /"
  rm -rf "$r"
}
llmc() {  # LABEL [env ...]: llm.c at B = 16, T = 1024, its row
  rm -f "/tmp/llmc-$1.jsonl"
  env "${@:2}" LLMC_LOGDIR="/tmp/llmc-$1" bench/train/llmc_run.sh "/tmp/llmc-$1.jsonl" 16 1024 >/dev/null 2>&1
  echo "llm.c $1: $(cat "/tmp/llmc-$1.jsonl")"
}
llmc plain
ft det true
ft atomic false
rm -rf /tmp/trace-llmc /tmp/trace-det /tmp/trace-atomic
llmc traced CUDA_INJECTION64_PATH="$lib" FT_KERNEL_TRACE_DIR=/tmp/trace-llmc
ft det-traced true CUDA_INJECTION64_PATH="$lib" FT_KERNEL_TRACE_DIR=/tmp/trace-det
ft atomic-traced false CUDA_INJECTION64_PATH="$lib" FT_KERNEL_TRACE_DIR=/tmp/trace-atomic
S=bench/profile/kernel_trace_summary.py
ours=cross_entropy_loss_and_grad
theirs=encoder_forward_kernel3
{
  for side in det atomic; do
    echo "## flashtrain ($side dQ) against llm.c, by part, ms a training step"
    python3 $S compare /tmp/trace-$side/trace-*.tsv /tmp/trace-llmc/trace-*.tsv --parts --skip 10 --top 30 --step-marker $ours $theirs
    echo
  done
  echo "## flashtrain (det dQ) against llm.c, kernel by kernel"
  python3 $S compare /tmp/trace-det/trace-*.tsv /tmp/trace-llmc/trace-*.tsv --skip 10 --top 40 --step-marker $ours $theirs
  echo
  echo "## llm.c, kernel by kernel"
  python3 $S summary /tmp/trace-llmc/trace-*.tsv --skip 10 --top 40 --step-marker $theirs
  echo
  echo "## flashtrain (det dQ), kernel by kernel"
  python3 $S summary /tmp/trace-det/trace-*.tsv --skip 10 --top 45 --step-marker $ours
  echo
  echo "## flashtrain (det dQ), gaps"
  python3 $S gaps /tmp/trace-det/trace-*.tsv --skip 10 --top 12
} 2>&1 | tee "$out/llmc-vs-ours.md"
(cd /tmp && tar cJf "$out/llmc-traces.tar.xz" trace-llmc trace-det trace-atomic)
