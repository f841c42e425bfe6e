#!/usr/bin/env bash
# Issue 17: how much cuBLASLt's first choice leaves on the table (FLASHTRAIN_MATMUL_TUNE,
# ops/cuda/matmul_tune.h). One call on one GPU, binaries carried (scripts/gpu_pack_bins.sh build
# flashtrain): GPT-2-small with compile_model at T = 1024 B = 16 dropout 0 and T = 4096 B = 4
# dropout 0.1 (deterministic), each run FLASHTRAIN_STEP_TIMING=1, STEPS (60) steps, interleaved:
# off, report (prints every plan's candidates), pick, off, pick. Logs under $OUT/tune/.
# Usage (repo root, .gpu carried): bench/train/dev/matmul_tune_call.sh
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/matmul_tune_call}; mkdir -p "$OUT/tune"
[ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
source scripts/gpu_unpack.sh
[ -x build-gpu/flashtrain ] || gpu_unpack || exit 1
data=${KJV_DIR:-.gpu/kjv}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader | head -1
for shape in "1024 16 0" "4096 4 0.1"; do
  set -- $shape; T=$1 B=$2 p=$3
  for mode in off report pick off pick; do
    log=$OUT/tune/T$T-$mode-$RANDOM.log; r=/tmp/tune-$RANDOM
    FLASHTRAIN_MATMUL_TUNE=$mode FLASHTRAIN_STEP_TIMING=1 timeout 200 build-gpu/flashtrain train configs/gpt2-small.yaml \
      --set max_seq_len=$T --set batch_size=$B --set dropout=$p --set deterministic=true \
      --set gradient_accumulation_steps=1 --set max_steps="${STEPS:-60}" --set log_interval=20 --set eval_interval=0 \
      --set checkpoint_interval=0 --set keep_checkpoints=1 --set out_dir=$r \
      --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" > "$log" 2>&1
    echo "T=$T p=$p tune=$mode rc=$?: $(grep -E 'step timing' "$log" | sed 's/.*(ms per step): //')"
    grep -E "step +60/|rror" "$log" | tail -2
    if [ $mode = report ]; then
      grep "matmul tune" "$log" | sed 's/flashtrain: matmul tune: //'
      python3 - "$log" <<'PY'
import re, sys
h = f = 0.0
for line in open(sys.argv[1]):
    m = re.search(r"heuristic ([0-9.]+) ms, fastest #\d+ ([0-9.]+) ms", line)
    if m: h += float(m.group(1)); f += float(m.group(2))
print(f"sum over plans (each once): heuristic {h:.3f} ms, fastest {f:.3f} ms")
PY
    fi
    rm -rf "$r"
  done
done
