#!/usr/bin/env bash
# Where does weak scaling lose? (an experiment, not the benchmark; bench/train/scaling.sh is that.)
# On an N-GPU machine, GPT-2-small T=1024 B=16 bf16, STEPS steps each, tokens/s per GPU from the
# median 10-step interval after step 20:
#   alone      one GPU, the others idle (the benchmark's baseline)
#   parallel   N independent one-GPU runs at once (no communication: what sharing the host,
#              power and clocks costs by itself)
#   dp         N-GPU data parallel, overlap on / off, and bucket sizes
#   bench/train/dev/scaling_probe.sh BUILD_DIR DATA_DIR [STEPS]
set -uo pipefail
build=${1:?build dir}; data=${2:?data dir}; steps=${3:-150}
export NCCL_NVLS_ENABLE=0
ngpu=$(nvidia-smi -L | wc -l)
common=(--set max_seq_len=1024 --set batch_size=16 --set gradient_accumulation_steps=1 --set max_steps=$steps
        --set log_interval=10 --set eval_interval=0 --set checkpoint_interval=0 --set keep_checkpoints=1
        --set compile_model=false --set device=cuda --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin")
rate() {  # median tokens/s per GPU of a run's metrics after step 20
  python3 - "$1" "$2" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l]
r = [x["tokens_per_s"] for x in rows if x["step"] > 20]
print(f"{statistics.median(r) / int(sys.argv[2]):.0f}" if r else "nan")
PY
}
run_one() {  # GPU OUT_DIR
  CUDA_VISIBLE_DEVICES=$1 "$build/flashtrain" train configs/gpt2-small.yaml "${common[@]}" --set out_dir=$2 > $2.log 2>&1
}
rm -rf /tmp/probe; mkdir -p /tmp/probe
run_one 0 /tmp/probe/alone; echo "alone: $(rate /tmp/probe/alone/metrics.jsonl 1) tok/s per GPU"
for g in $(seq 0 $((ngpu - 1))); do run_one $g /tmp/probe/par$g & done; wait
for g in $(seq 0 $((ngpu - 1))); do echo "parallel gpu$g: $(rate /tmp/probe/par$g/metrics.jsonl 1) tok/s"; done
for spec in "1 25" "0 25" "1 100" "1 6"; do
  set -- $spec
  FLASHTRAIN_DP_OVERLAP=$1 "$build/flashtrain" train configs/gpt2-small.yaml --nproc $ngpu "${common[@]}" \
    --set allreduce_bucket_mb=$2 --set out_dir=/tmp/probe/dp-$1-$2 > /tmp/probe/dp-$1-$2.log 2>&1
  rc=$?
  echo "dp x$ngpu overlap=$1 bucket=$2 MiB: $(rate /tmp/probe/dp-$1-$2/metrics.jsonl $ngpu) tok/s per GPU (rc $rc)"
done
