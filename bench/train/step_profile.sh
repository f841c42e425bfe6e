#!/usr/bin/env bash
# Where one flashtrain training step's GPU time goes, by part (matmuls, attention forward/backward,
# LayerNorm, GELU, dropout, residual adds, cross-entropy, embedding, AdamW, grad norm, copies):
# Nsight Compute times every kernel of ${PROFILE_STEPS:-3} eager steps (compile_model false, no eval,
# no checkpoint) of configs/gpt2-small.yaml, then bench/train/step_profile.py groups the kernels of
# the last full step (steps are split at the AdamW kernel).
#   bench/train/step_profile.sh BUILD_DIR DATA_DIR OUT_DIR [T B DROPOUT] [--label NAME] [--deterministic false]
#                               [--set KEY=VALUE ...]   (more config keys, e.g. --set head_chunk_mib=0)
# Defaults T=1024 B=16 DROPOUT=0.1, deterministic true (training's default). Writes
#   OUT_DIR/step-profile-<card>[-<label>][-T<T>-B<B>-p<p> unless the default shape].{md,json,csv.gz}
# (the .csv.gz is ncu's raw CSV) and prints the md. The label (e.g. before / after) goes into the
# file name and the title, so two profiles sit side by side. About 1-3 minutes on an H100 (ncu
# serialises and times ~900 kernels a step one by one). The commit: $FT_COMMIT, else git.
set -uo pipefail
build=$(realpath "${1:?build dir}"); data=$(realpath "${2:?data dir}"); mkdir -p "${3:?out dir}"; outdir=$(realpath "$3")
shift 3
label=""; det=true; pos=(); extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --label) label=${2:?--label needs a name}; shift 2 ;;
    --deterministic) det=${2:?--deterministic needs true or false}; shift 2 ;;
    --set) extra+=(--set "${2:?--set needs KEY=VALUE}"); shift 2 ;;
    *) pos+=("$1"); shift ;;
  esac
done
T=${pos[0]:-1024}; B=${pos[1]:-16}; p=${pos[2]:-0.1}
cd "$(dirname "$0")/../.." || exit 1
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
card_short=$(echo "$card" | tr 'A-Z' 'a-z' | grep -oE '(h100|h200|h20|b200|b100|gh200|a100|l40s|l4|a10g)' | head -1)
[ -n "$card_short" ] || card_short=$(echo "${card:-unknown}" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
commit=${FT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
name=step-profile-$card_short${label:+-$label}
[ "$T $B $p" = "1024 16 0.1" ] || name=$name-T$T-B$B-p$p
[ "$det" = true ] || name=$name-atomic
prefix=$outdir/$name
run=/tmp/ft-step-profile-$$
rm -rf "$run"
command -v ncu >/dev/null || { echo "step_profile: ncu is not on the PATH"; exit 1; }
train=("$build/flashtrain" train configs/gpt2-small.yaml --set "max_seq_len=$T" --set "batch_size=$B" --set "dropout=$p"
  --set "deterministic=$det" --set compile_model=false --set gradient_accumulation_steps=1
  --set "max_steps=${PROFILE_STEPS:-3}" --set log_interval=1 --set eval_interval=0 --set checkpoint_interval=0
  --set keep_checkpoints=1 --set "out_dir=$run" --set "train_data=$data/train_*.bin" --set "val_data=$data/val_*.bin" "${extra[@]}")
echo "step_profile: $card ($card_short), commit $commit, T=$T B=$B dropout=$p deterministic=$det ${extra[*]} -> $prefix.*"
t0=$(date +%s)
# --log-file keeps the program's own output out of the CSV; step_profile.py skips any ==PROF== lines.
ncu --metrics gpu__time_duration.sum --cache-control none --clock-control none --csv --print-kernel-base demangled \
  --log-file "$prefix.csv" "${train[@]}" > "$prefix.train.log" 2>&1
status=$?
if ! grep -q '^"ID"' "$prefix.csv" 2>/dev/null; then
  echo "step_profile: ncu gave no CSV with --print-kernel-base (rc $status); once more without it"
  tail -5 "$prefix.train.log"
  rm -rf "$run"
  ncu --metrics gpu__time_duration.sum --cache-control none --clock-control none --csv \
    --log-file "$prefix.csv" "${train[@]}" > "$prefix.train.log" 2>&1
  status=$?
fi
echo "step_profile: ncu rc $status, $(( $(date +%s) - t0 )) s; $(grep -c '^"' "$prefix.csv" 2>/dev/null) CSV rows"
grep -E "done:|error|Error" "$prefix.train.log" | tail -3
rm -rf "$run"
python3 bench/train/step_profile.py "$prefix.csv" --out-prefix "$prefix" \
  --title "flashtrain step profile${label:+ ($label)}: GPT-2-small T=$T B=$B dropout $p, deterministic $det, $card_short" \
  --meta card="$card" commit="$commit" date="$(date -u +%Y-%m-%dT%H:%M:%SZ)" label="${label:-none}" T=$T B=$B \
  dropout=$p deterministic=$det compile_model=false ${extra[*]:+sets="${extra[*]}"}
rc=$?
gzip -f "$prefix.csv" && echo "step_profile: raw CSV in $prefix.csv.gz"
exit $rc
