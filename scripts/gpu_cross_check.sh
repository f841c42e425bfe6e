#!/usr/bin/env bash
# Issue 5's cross-check on a GPU machine with PyTorch + transformers: train GPT-2-small briefly,
# then check that Hugging Face's GPT2LMHeadModel loads our checkpoint and computes the same loss
# over the validation shard, logits and every parameter gradient of one batch (bf16 tolerance,
# judged by PyTorch autocast's error; tests/train/hf_grad_cross_check.py says how).
#   scripts/gpu_cross_check.sh BUILD_DIR DATA_DIR [WORK_DIR]     (DATA_DIR holds train_/val_*.bin)
#   XCHECK_SETS="--set head_chunk_mib=64 ..." adds config keys to the training run (64 MiB puts its
#   head in chunks at this shape), and the checkpoint carries them into `flashtrain gradients`.
#   That command runs the model without a gradient-scale hint, so the two-pass head: head_chunk_mib
#   changes the checkpoint it evaluates, not how it computes (session 38, hf-cross-check-h200-s38.md).
#   XCHECK_BAR=bf16 judges the gradients by PyTorch's model cast to bf16 instead of autocast: the
#   fair bar under XCHECK_SETS="--set layernorm_fp32=false" (bf16 LayerNorm parameters).
set -uo pipefail
build=${1:?build dir}; data=${2:?data dir}; work=${3:-/tmp/ft-cross-check}
export PYTHONUNBUFFERED=1
rm -rf "$work"; mkdir -p "$work"
read -ra extra <<< "${XCHECK_SETS:-}"
"$build/flashtrain" train configs/gpt2-small.yaml --set max_seq_len=256 --set batch_size=8 \
  --set gradient_accumulation_steps=1 --set max_steps=60 --set warmup_steps=10 --set lr=6e-4 --set eval_interval=0 \
  --set checkpoint_interval=0 --set log_interval=20 --set out_dir="$work/run" \
  --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" "${extra[@]}" 2>&1 | tail -2 || exit 1
ckpt=$work/run/ckpt-60
ours=$("$build/flashtrain" eval --checkpoint "$ckpt" --data "$data/val_000000.bin" --batch-size 8 --seq-len 256) || exit 1
echo "$ours"
rc=0
python3 tests/train/hf_cross_check.py "$ckpt" "$data/val_000000.bin" --seq-len 256 --batch-size 8 \
  --ours-loss "$(echo "$ours" | awk '{print $2}')" 2>&1 | grep -v Warning | tail -1 || rc=1
"$build/flashtrain" gradients --checkpoint "$ckpt" --data "$data/val_000000.bin" --batch-size 4 --seq-len 256 \
  --out "$work/grads.safetensors" || exit 1
python3 tests/train/hf_grad_cross_check.py "$ckpt" "$work/grads.safetensors" --bar "${XCHECK_BAR:-autocast}" 2>&1 | grep -v Warning || rc=1
exit $rc
