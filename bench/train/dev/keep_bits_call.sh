#!/usr/bin/env bash
# Issue 17, session 21: the forward's dropout keep bits stored for the backward
# (ops/attention_keep_bits.h) against the backward drawing them again, in one call on one GPU.
# Binaries carried (scripts/gpu_pack_bins.sh build flashtrain tests/ft_ops_tests), or the tree built
# on the device first (cmake --build build-gpu --target flashtrain ft_ops_tests: 80 s there, where the
# attention kernels take most of an hour on a 2-core machine). Stages:
#   test    the keep-bit tests (CPU layout, kernels bit for bit against the drawn mask, which calls
#           store them) and the flash-vs-naive dropout tests
#   timing  GPT-2-small, compile_model, deterministic, dropout 0.1, STEPS (60) steps a run,
#           FLASHTRAIN_STEP_TIMING=1, FLASHTRAIN_ATTENTION_KEEP_BITS=0 / 1 / 2 (2: stored, drawn anyway: the
#           stores' cost) at T = 4096 B = 4
#           and T = 1024 B = 16; losses printed (they must be equal: the same mask either way) and
#           the peak memory
# Usage (repo root, .gpu carried): bench/train/dev/keep_bits_call.sh [stage...]   (default: all)
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/keep_bits_call}; mkdir -p "$OUT/keep"
stages=${*:-test timing}
[ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
source scripts/gpu_unpack.sh
[ -x build-gpu/flashtrain ] || gpu_unpack || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
if [[ " $stages " == *" test "* ]]; then
  timeout 400 build-gpu/tests/ft_ops_tests \
    --gtest_filter='AttentionKeepBits.*:AttentionFrontCuda.StoredKeepBits*:FlashCuda.StoredKeepBits*:FlashCuda.KeepBits*:FlashCuda.SameMaskAsNaive:FlashCuda.DroppedFraction*:FlashCudaWsBackward.*:FlashCuda.DeterministicBackwardIsBitIdentical' \
    > "$OUT/keep/test.log" 2>&1
  echo "keep-bit and dropout GPU tests rc=$?"
  grep -E "^\[  (PASSED|FAILED) |^\[==========\]|Failure|Expected|Which is|dq|dk|dv" "$OUT/keep/test.log" | head -30
fi
if [[ " $stages " == *" timing "* ]]; then
  data=${KJV_DIR:-.gpu/kjv}
  for shape in "4096 4 0 1 2 1 0" "1024 16 0 1"; do
    set -- $shape; T=$1 B=$2; shift 2
    for bits in "$@"; do
      log=$OUT/keep/T$T-bits$bits-$RANDOM.log; r=/tmp/keep-$RANDOM
      FLASHTRAIN_ATTENTION_KEEP_BITS=$bits FLASHTRAIN_STEP_TIMING=1 timeout 200 build-gpu/flashtrain train \
        configs/gpt2-small.yaml --set max_seq_len=$T --set batch_size=$B --set dropout=0.1 --set deterministic=true \
        --set gradient_accumulation_steps=1 --set max_steps="${STEPS:-60}" --set log_interval=20 --set eval_interval=0 \
        --set checkpoint_interval=0 --set keep_checkpoints=1 --set out_dir=$r \
        --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" > "$log" 2>&1
      echo "T=$T B=$B keep_bits=$bits rc=$?: $(grep -E 'step timing' "$log" | sed 's/.*(ms per step): //')"
      grep -E "step +(20|40|60)/|peak|rror" "$log" | tail -4
      rm -rf "$r"
    done
  done
fi
