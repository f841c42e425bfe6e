#!/usr/bin/env bash
# The README's main job: build flashtrain, prepare the built-in corpus (the King James Bible,
# from Debian's bible-kjv package) as token shards, and train GPT-2-small on a GPU, or the tiny
# configuration on the CPU when no GPU is present.
#   scripts/train.sh [extra flashtrain train flags, e.g. --set max_steps=200]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
scripts/fetch_gpt2_bpe.sh
if [ ! -x build/flashtrain ] || [ -n "$(find core ops autograd nn train data -newer build/flashtrain -print -quit 2>/dev/null)" ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j "$(nproc)" --target flashtrain
fi
if ! ls data/kjv/train_*.bin >/dev/null 2>&1; then
  build/flashtrain prepare --corpus kjv --out data/kjv
fi
config=configs/tiny.yaml
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  config=configs/gpt2-small.yaml
fi
echo "train.sh: training with $config (results under its out_dir)" >&2
exec build/flashtrain train "$config" "$@"
