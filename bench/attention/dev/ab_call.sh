#!/usr/bin/env bash
# One device call that compares two builds of the attention kernels: A, the working tree as sent,
# and B, a tarball of the base commit (make it where the tree is sent from:
# `git archive --format=tar.gz -o .gpu/base.tar.gz <commit>`; carry .gpu). For kernel changes that
# must keep every bit and should be faster (e.g. folding the fixed-point dQ's 2^40 into K):
#   1. both libft_attention.so (and flashtrain) built side by side;
#   2. dq_bits.py: the deterministic backward of A and B bit for bit (fixed-point form forced);
#   3. bench_attention.py --dev, D = 64 and 128: A's variants 0 (atomic) and 4 (deterministic)
#      against B's (base_flash, base_flash_det) in one process, fixed-point form forced;
#   4. GPT-2-small, T = 1024 B = 16, dropout 0.1, deterministic, 40 steps with A's and B's
#      flashtrain: losses equal to the last printed digit, and tokens/s; then A atomic (the
#      deterministic mode's cost, issue 17's 3% bar).
# Usage (repo root, on the GPU machine): bench/attention/dev/ab_call.sh [BASE_TAR] (default .gpu/base.tar.gz)
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/ab_call}; mkdir -p "$OUT"
tarball=$(realpath "${1:-.gpu/base.tar.gz}")
export NCCL_NVLS_ENABLE=0
[ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
[ -d .gpu/pcre2 ] && export PKG_CONFIG_PATH=$PWD/.gpu/pcre2/lib/pkgconfig
base=/tmp/ab_base; rm -rf $base; mkdir -p $base; tar xzf "$tarball" -C $base
[ -d .gpu ] && ln -sfn "$PWD/.gpu" $base/.gpu
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
t0=$(date +%s)
build() {  # $1 source dir, $2 build dir
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null &&
    cmake --build "$2" -j 8 --target ft_attention_capi flashtrain
}
build . build-a > "$OUT/build-a.log" 2>&1 & pa=$!
build $base $base/build-b > "$OUT/build-b.log" 2>&1 & pb=$!
wait $pa || { grep -E "error" "$OUT/build-a.log" | head -20; exit 1; }
wait $pb || { grep -E "error" "$OUT/build-b.log" | head -20; exit 1; }
echo "builds: $(( $(date +%s) - t0 )) s"
libA=build-a/bench/attention/libft_attention.so; libB=$base/build-b/bench/attention/libft_attention.so

FLASHTRAIN_DETERMINISTIC_DQ=fixed timeout 120 python3 bench/attention/dev/dq_bits.py $libA $libB 2>&1 | tee "$OUT/dq_bits.log" | tail -3
for d in 64 128; do
  FLASHTRAIN_DETERMINISTIC_DQ=fixed timeout 150 python3 bench/attention/bench_attention.py --lib $libA --base-lib $libB \
    --out /tmp/ab_bench --dev --ds $d --variants 0,4 --dev-ts 1024,4096 --dev-refs base_flash,base_flash_det \
    > "$OUT/bench-d$d.log" 2>&1
  echo "D=$d"; grep -E "^dev " "$OUT/bench-d$d.log" | sed -E 's/ \([0-9]+ TF\)//g'
done

data=${KJV_DIR:-.gpu/kjv}
train() {  # $1 label, $2 flashtrain, $3 deterministic
  local run=/tmp/ab-train-$1; rm -rf $run
  timeout 150 "$2" train configs/gpt2-small.yaml --set max_seq_len=1024 --set batch_size=16 --set dropout=0.1 \
    --set deterministic=$3 --set gradient_accumulation_steps=1 --set max_steps=40 --set log_interval=10 \
    --set eval_interval=0 --set checkpoint_interval=0 --set keep_checkpoints=1 --set out_dir=$run \
    --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" > "/tmp/ab-train-$1.log" 2>&1
  echo "$1: $(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if '\"loss\"' in l]; print(' '.join(repr(x.get('loss')) for x in r), '| tokens/s', r[-1].get('tokens_per_s'))" $run/metrics.jsonl)"
}
{ train A-det build-a/flashtrain true; train B-det $base/build-b/flashtrain true; train A-atomic build-a/flashtrain false
  train A-det-2 build-a/flashtrain true; train B-det-2 $base/build-b/flashtrain true; } | tee "$OUT/train.log"
