#!/usr/bin/env bash
# Device calls on 2 GPUs for issue 20's open question: why overlapping the gradient sum with the
# backward costs about what it hides (bench/train/NOTES.md). Stages (default: all; more than one
# 10-minute call, so run `probe build dptests` in one call and `ctas` in the next on the same warm
# machine, whose build-gpu/ stays):
#   probe    bench/train/overlap_probe.py under torchrun with NCCL's default CTA count and with
#            NCCL_MAX_CTAS = 8 and 2 (fewer SMs taken by the collective kernels), then in one process
#            with peer copies (copy engines only)                                        (~2 min)
#   build    flashtrain and ft_train_tests (scripts/gpu_dist_check.sh build)              (~3 min)
#   dptests  the data-parallel tests (gpu_dist_check.sh test; ZeRO-1's f16 all-gather of 24a8ebc
#            has never run on GPUs)                                                      (~3 min)
#   ctas     GPT-2-small step timing (FLASHTRAIN_STEP_TIMING=1, T = 1024, B = 16 a GPU, 60 steps) on
#            1 GPU, then 2 GPUs with ZeRO-1 (bf16, the fastest of session 14) and with the eager
#            overlapped all-reduce (compile_model false), each under NCCL_MAX_CTAS unset / 8 / 4:
#            whether fewer NCCL CTAs make the sum cheaper to hide                       (~6 min)
# Usage (repo root, on a machine with 2+ GPUs, .gpu carried): bench/train/dev/overlap_probe_call.sh [stage...]
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/overlap_probe_call}; mkdir -p "$OUT"
steps=${*:-probe build dptests ctas}
has() { [[ " $steps " == *" $1 "* ]]; }
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1

if has probe; then
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
fi
has build && OUT=$OUT timeout 420 scripts/gpu_dist_check.sh build
has dptests && OUT=$OUT timeout 420 scripts/gpu_dist_check.sh test

if has ctas; then
  [ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
  data=${KJV_DIR:-.gpu/kjv}
  timing() {  # timing LABEL NCCL_MAX_CTAS("" = NCCL's choice) GPUS ZERO1 COMPILE
    local run=/tmp/ctas-$1; rm -rf "$run"
    local nproc=(); [ "$3" -gt 1 ] && nproc=(--nproc "$3")
    local env=(FLASHTRAIN_STEP_TIMING=1)
    [ -n "$2" ] && env+=(NCCL_MAX_CTAS="$2" NCCL_MIN_CTAS=1)
    env "${env[@]}" timeout 120 build-gpu/flashtrain train configs/gpt2-small.yaml "${nproc[@]}" --set max_seq_len=1024 \
      --set batch_size=16 --set gradient_accumulation_steps=1 --set max_steps=60 --set log_interval=10 \
      --set eval_interval=0 --set checkpoint_interval=0 --set keep_checkpoints=1 --set mixed_precision=bf16 \
      --set device=cuda --set zero1="$4" --set compile_model="$5" --set grad_reduce_dtype=bf16 --set out_dir="$run" \
      --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" > "$run.log" 2>&1
    echo "== $1 (rc $?): $(grep -m1 'done:' "$run.log" | sed 's/.*loss [^,]*, //')"
    grep "step timing" "$run.log" | sed 's/^flashtrain: /   /'
  }
  {
    timing 1gpu "" 1 false true
    for c in "" 8 4; do
      timing "zero1-ctas${c:-default}" "$c" 2 true true
      timing "eager-overlap-ctas${c:-default}" "$c" 2 false false
    done
  } | tee "$OUT/ctas.log"
fi
