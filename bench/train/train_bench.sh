#!/usr/bin/env bash
# Issue 5's training benchmark, both sides on the same card in one call: GPT-2-small, bf16, dropout
# 0.1, one micro-batch per step, at T = 1024, B = 16 and T = 512, B = 32. flashtrain with flash
# attention eager and with compile_model (CUDA graph), naive attention eager; PyTorch eager and
# torch.compile (bench/train/torch_gpt2.py). Writes OUT_DIR/train-rows.jsonl and train-table.md
# (bench/train/summarize_train.py); run logs stay in /tmp/ft-bench-*.log.
#   bench/train/train_bench.sh BUILD_DIR DATA_DIR OUT_DIR [--no-torch]
set -uo pipefail
build=${1:?build dir}; data=${2:?data dir}; outdir=${3:?out dir}; torch=${4:-}
export PYTHONUNBUFFERED=1
mkdir -p "$outdir"
rows=$outdir/train-rows.jsonl
: > "$rows"
for shape in 1024x16 512x32; do
  T=${shape%x*}; B=${shape#*x}
  for variant in "flash true false" "flash true true" "naive false false"; do
    set -- $variant
    run=/tmp/ft-bench-$1-$3-$shape
    rm -rf "$run"
    log=$run.log  # in /tmp: the device tool brings back few files
    timeout 240 "$build/flashtrain" train configs/gpt2-small.yaml --set max_seq_len=$T --set batch_size=$B \
      --set gradient_accumulation_steps=1 --set max_steps=30 --set log_interval=10 --set eval_interval=0 \
      --set checkpoint_interval=0 --set keep_checkpoints=1 --set use_flash_attention=$2 --set compile_model=$3 \
      --set out_dir=$run --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" > "$log" 2>&1
    echo "== ours $1 compile_model=$3 T=$T B=$B (rc $?)"; grep -E "compile_model|done:" "$log" | tail -2
    python3 - "$run/metrics.jsonl" "$log" "$1" "$3" "$T" "$B" >> "$rows" <<'PY'
import json, re, sys
metrics, log, attn, compiled, T, B = sys.argv[1:]
steps = [json.loads(l) for l in open(metrics) if '"tokens_per_s"' in l]
peak = re.findall(r"peak device memory ([0-9.]+) MiB", open(log).read())
print(json.dumps({"impl": f"flashtrain_{attn}" + ("_graph" if compiled == "true" else ""), "T": int(T), "B": int(B),
                  "tokens_per_s": steps[-1]["tokens_per_s"] if steps else None,
                  "step_ms": 1000 * int(T) * int(B) / steps[-1]["tokens_per_s"] if steps else None,
                  "peak_mib": float(peak[-1]) if peak else None, "loss_30": steps[-1]["loss"] if steps else None}))
PY
  done
done
if [ "$torch" != "--no-torch" ]; then
  python3 bench/train/torch_gpt2.py --shapes 1024x16 512x32 --steps 20 --json "$outdir/torch.json" 2>&1 | grep -v Warning | tail -4
  python3 -c "import json,sys; [print(json.dumps(r)) for r in json.load(open(sys.argv[1]))]" "$outdir/torch.json" >> "$rows"
fi
python3 bench/train/summarize_train.py "$rows" | tee "$outdir/train-table.md"
