#!/usr/bin/env bash
# Where the data-parallel step's extra time goes (issue 20): Nsight Systems over a GPT-2-small run on
# N GPUs (T = 1024, B = 16 per GPU, compile_model as configured), then bench/train/dp_timeline.py
# reads the kernel timeline of each GPU over the second half of the run: wall time per step, time
# with a kernel running, NCCL kernel time, compute overlapped by NCCL, and the idle gaps.
#   bench/train/dp_profile.sh BUILD_DIR DATA_DIR OUT_DIR [N_GPUS (2)] [STEPS (40)] [extra --set args...]
set -uo pipefail
build=${1:?build dir}; data=${2:?data dir}; outdir=${3:?out dir}; n=${4:-2}; steps=${5:-40}
shift 5 2>/dev/null || shift $#
export NCCL_NVLS_ENABLE=0
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
[ -x "$nsys" ] || { echo "dp_profile: nsys not found" >&2; exit 2; }
mkdir -p "$outdir"
run=$outdir/dp-run
rm -rf "$run"
nproc=(); [ "$n" -gt 1 ] && nproc=(--nproc "$n")
"$nsys" profile -t cuda,nvtx --sample=none --cpuctxsw=none -o "$outdir/dp$n" --force-overwrite true \
  "$build/flashtrain" train configs/gpt2-small.yaml "${nproc[@]}" \
  --set max_seq_len=1024 --set batch_size=16 --set gradient_accumulation_steps=1 --set max_steps="$steps" \
  --set log_interval=5 --set eval_interval=0 --set checkpoint_interval=0 --set keep_checkpoints=1 \
  --set mixed_precision=bf16 --set device=cuda --set out_dir="$run" \
  --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" "$@" > "$outdir/dp$n.log" 2>&1
echo "nsys rc=$? ($(grep -m1 'done:' "$outdir/dp$n.log"))"
rm -rf "$run"
"$nsys" export --type sqlite --force-overwrite true -o "$outdir/dp$n.sqlite" "$outdir/dp$n.nsys-rep" >/dev/null 2>&1
python3 "$(dirname "$0")/dp_timeline.py" "$outdir/dp$n.sqlite" "$steps"
