#!/usr/bin/env bash
# The README's test command: installs what is missing, fetches the GPT-2 vocabulary files,
# configures, builds and runs every test. GPU tests run when a GPU is present and skip (with the
# reason) when not.  Usage: scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
scripts/install_deps.sh
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
if [ -x scripts/fetch_gpt2_bpe.sh ]; then
  scripts/fetch_gpt2_bpe.sh || echo "test.sh: could not fetch the GPT-2 vocabulary; tokenizer tests will skip" >&2
fi
jobs=$(nproc)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
