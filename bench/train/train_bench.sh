#!/usr/bin/env bash
# Issue 17's training benchmark, every side on the same card in one call: GPT-2-small, bf16, one
# micro-batch per step, at T = 1024, B = 16 and T = 4096, B = 4, dropout 0 and 0.1.
#   flashtrain   configs/gpt2-small.yaml, flash attention, compile_model (CUDA graph) as default:
#                deterministic true at dropout 0 and 0.1, deterministic false (atomic dQ) at 0.1;
#                ${FT_STEPS:-80} steps, tokens/s the median of the logged intervals (log_interval 10)
#                ending at steps 20-80 (bench/train/parse_run.py)
#   torch_compile, torch_eager   bench/train/torch_nanogpt.py (nanoGPT-style model, fused AdamW),
#                one process for all their rows, median of ${TORCH_STEPS:-20} steps (TORCH_IMPLS: which)
#   llmc_cudnn   bench/train/llmc_run.sh (binary ${LLMC_BIN:-.gpu/llmc/train_gpt2cu_cudnn}), dropout 0,
#                T = 1024 only (llm.c's d12 has 1024 positions)
# Writes OUT_DIR/train-<card>.json ({card, commit, date, rows}) and OUT_DIR/train-<card>.md (table and
# the issue's bars, bench/train/summarize_train.py), and prints the md. Run logs go to OUT_DIR/logs/.
# About 5-7 minutes on an H100 (torch.compile's four compiles are most of it).
#   bench/train/train_bench.sh BUILD_DIR DATA_DIR OUT_DIR [--no-torch] [--no-llmc] [--no-flashtrain]
# From the repo root (or anywhere: it moves there). The commit: $FT_COMMIT, else git, else "unknown".
set -uo pipefail
build=$(realpath "${1:?build dir}"); data=$(realpath "${2:?data dir}"); mkdir -p "${3:?out dir}"; outdir=$(realpath "$3")
shift 3
do_torch=1; do_llmc=1; do_ft=1
for a in "$@"; do
  case $a in
    --no-torch) do_torch=0 ;;
    --no-llmc) do_llmc=0 ;;
    --no-flashtrain) do_ft=0 ;;
    *) echo "train_bench: unknown option $a"; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.." || exit 1
export PYTHONUNBUFFERED=1
logs=$outdir/logs
mkdir -p "$logs"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
card_short=$(echo "$card" | tr 'A-Z' 'a-z' | grep -oE '(h100|h200|h20|b200|b100|gh200|a100|l40s|l4|a10g)' | head -1)
[ -n "$card_short" ] || card_short=$(echo "${card:-unknown}" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
commit=${FT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
rows=$outdir/train-rows-$card_short.jsonl
: > "$rows"
shapes="1024x16 4096x4"
t_start=$(date +%s)
echo "train_bench: card '$card' ($card_short), commit $commit, rows in $rows"

if [ $do_ft = 1 ]; then
  for shape in $shapes; do
    T=${shape%x*}; B=${shape#*x}
    for variant in "0 true" "0.1 true" "0.1 false"; do
      set -- $variant
      p=$1; det=$2
      run=/tmp/ft-bench-$shape-p$p-det$det
      rm -rf "$run"
      log=$logs/flashtrain-$shape-p$p-det$det.log
      t0=$(date +%s)
      timeout 300 "$build/flashtrain" train configs/gpt2-small.yaml --set max_seq_len=$T --set batch_size=$B \
        --set dropout=$p --set deterministic=$det --set gradient_accumulation_steps=1 \
        --set max_steps=${FT_STEPS:-80} --set log_interval=10 --set eval_interval=0 --set checkpoint_interval=0 \
        --set keep_checkpoints=1 --set out_dir=$run \
        --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" > "$log" 2>&1
      status=$?
      row=$(python3 bench/train/parse_run.py flashtrain "$run/metrics.jsonl" "$log" $T $B $p $det)
      echo "$row" >> "$rows"
      echo "== flashtrain T=$T B=$B dropout=$p deterministic=$det (rc $status, $(( $(date +%s) - t0 )) s): $(grep -E "done:" "$log" | tail -1)"
      [ $status -eq 0 ] || tail -5 "$log"
      rm -rf "$run"
    done
  done
fi

if [ $do_torch = 1 ]; then
  t0=$(date +%s)
  timeout 480 python3 bench/train/torch_nanogpt.py --shapes $shapes --dropout 0 0.1 --steps ${TORCH_STEPS:-20} \
    --impls ${TORCH_IMPLS:-torch_compile torch_eager} --json "$outdir/torch-$card_short.json" > "$logs/torch.log" 2>&1
  status=$?
  echo "== torch (rc $status, $(( $(date +%s) - t0 )) s)"; grep -E '^\{|^torch ' "$logs/torch.log" | cut -c1-240
  [ $status -eq 0 ] || grep -vE '^\{|Warning' "$logs/torch.log" | tail -15
  python3 -c "import json,sys; [print(json.dumps(r)) for r in json.load(open(sys.argv[1]))]" \
    "$outdir/torch-$card_short.json" >> "$rows" 2>/dev/null || echo "torch: no rows"
fi

if [ $do_llmc = 1 ]; then
  t0=$(date +%s)
  LLMC_LOGDIR=$logs bench/train/llmc_run.sh "$rows" 16 1024
  echo "== llmc ($(( $(date +%s) - t0 )) s)"
fi

python3 bench/train/summarize_train.py "$rows" --card "$card_short" --card-name "$card" --commit "$commit" \
  --json "$outdir/train-$card_short.json" --md "$outdir/train-$card_short.md" && cat "$outdir/train-$card_short.md"
echo "train_bench: $(( $(date +%s) - t_start )) s in all; $outdir/train-$card_short.{json,md}"
