#!/usr/bin/env bash
# llm.c (karpathy/llm.c, built with cuDNN attention: /work/shared/anchors/llmc/build.sh) timed on
# this GPU, the recipe of the anchors' run.sh: random-token shards in llm.c's format (magic
# 20240520, version 1, uint16), `-e d12` (GPT-2-small from scratch, 1024 positions, so T <= 1024),
# `-r 0` (no recompute, its fastest), no evaluation worth the name, no sampling, no checkpoints,
# 30 steps; the row takes the median step time of steps 6-30 (bench/train/parse_run.py llmc).
# llm.c has no dropout: its rows are dropout 0.
#   bench/train/llmc_run.sh ROWS_JSONL B T [B T ...]      (from the repo root)
# Appends one JSON row per (B, T) to ROWS_JSONL; logs go to ${LLMC_LOGDIR:-/tmp}/llmc_b<B>_t<T>.log.
# The binary: ${LLMC_BIN:-.gpu/llmc/train_gpt2cu_cudnn}, relative to the repo root.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rows=${1:?rows jsonl}; shift
bin=${LLMC_BIN:-.gpu/llmc/train_gpt2cu_cudnn}
[[ $bin = /* ]] || bin=$PWD/$bin
logdir=${LLMC_LOGDIR:-/tmp}
mkdir -p "$logdir"
here=$PWD
fail_rows() {  # every requested (B, T) as a failed row, then stop
  echo "llmc: $1"
  while [ $# -ge 3 ]; do
    echo "{\"impl\": \"llmc_cudnn\", \"T\": $3, \"B\": $2, \"dropout\": 0.0, \"deterministic\": false, \"tokens_per_s\": null, \"peak_mib\": null, \"error\": \"$1\"}" >> "$rows"
    set -- "$1" "${@:4}"
  done
  exit 1
}
[ -x "$bin" ] || fail_rows "no binary at $bin (build: /work/shared/anchors/llmc/build.sh; or set LLMC_BIN)" "$@"
work=$(mktemp -d /tmp/llmc-run.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY' || fail_rows "writing random shards failed (numpy?)" "$@"
import os, sys
import numpy as np
rng = np.random.default_rng(0)
for name, n in [("train_000001.bin", 20_000_000), ("val_000000.bin", 1_000_000)]:
    hdr = np.zeros(256, dtype=np.int32); hdr[:3] = (20240520, 1, n)
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(hdr.tobytes()); f.write(rng.integers(0, 50257, n, dtype=np.uint16).tobytes())
PY
rc=0
while [ $# -ge 2 ]; do
  B=$1; T=$2; shift 2
  log=$logdir/llmc_b${B}_t${T}.log
  (cd "$work" && timeout 300 "$bin" -e d12 -b "$B" -t "$T" -i "$work/train_*.bin" -j "$work/val_*.bin" -x 30 \
     -s 0 -h 0 -n 0 -v 1000 -m 1 -l 6e-4 -u 0 -r 0 -y 0) > "$log" 2>&1
  status=$?
  row=$(python3 "$here/bench/train/parse_run.py" llmc "$log" "$T" "$B")
  echo "$row" >> "$rows"
  echo "== llmc_cudnn B=$B T=$T (rc $status): $row" | cut -c1-300
  [ $status -eq 0 ] || { rc=1; tail -5 "$log"; }
done
exit $rc
