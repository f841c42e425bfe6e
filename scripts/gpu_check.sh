#!/usr/bin/env bash
# One call on the GPU machine: build, run every test (GPU tests included), run the benchmarks.
# Logs and result tables go to $OUT (the device tool brings that folder back).
#   scripts/gpu_check.sh [unpack] [build] [test] [bench] [crosscheck] [trainbench]   (default: build test bench)
# unpack: binaries built elsewhere (scripts/gpu_pack_bins.sh: .gpu/bins.tar.xz) into build-gpu/, in
#         place of `build`; `test` then runs the test binaries themselves (no ctest files travel).
# crosscheck: Hugging Face loads our checkpoint; loss, logits and gradients agree (scripts/gpu_cross_check.sh).
# trainbench: GPT-2-small tokens/s and memory against llm.c (cuDNN), torch.compile and PyTorch eager (bench/train/).
# sanitize: compute-sanitizer memcheck / racecheck / synccheck / initcheck over every flash kernel path.
# attnbench: bench/attention/bench_attention.py against PyTorch's flash and cuDNN SDPA (ATTN_ARGS adds
#            arguments, e.g. "--ds 64,128 --ts 1024,4096,16384 --rounds 2").
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/flashtrain-gpu-check}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared machines
steps=${*:-build test bench}
build=build-gpu
# .gpu/ (git-ignored, sent with the device tool's carry) holds what the GPU machine cannot fetch:
# the GPT-2 vocabulary (bpe/) and PCRE2 headers with a static library (pcre2/, from Debian's
# libpcre2-dev), which that machine's image lacks.
[ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
[ -d .gpu/pcre2 ] && export PKG_CONFIG_PATH=$PWD/.gpu/pcre2/lib/pkgconfig
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader || true

if [[ " $steps " == *" unpack "* ]]; then
  source scripts/gpu_unpack.sh
  gpu_unpack || exit 1
fi
if [[ " $steps " == *" build "* ]]; then
  t0=$(date +%s)
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a >"$OUT/configure.log" 2>&1 \
    || { tail -30 "$OUT/configure.log"; exit 1; }
  if ! cmake --build $build -j "$(nproc)" >"$OUT/build.log" 2>&1; then
    grep -E "error|Error" "$OUT/build.log" | head -40
    exit 1
  fi
  echo "build: $(( $(date +%s) - t0 )) s"
fi
if [[ " $steps " == *" sanitize "* ]]; then
  scripts/attention_sanitize.sh $build 2>&1 | tee "$OUT/sanitize.log" | tail -20
  echo "sanitize rc=${PIPESTATUS[0]}"
fi
if [[ " $steps " == *" attnbench "* ]]; then
  # shellcheck disable=SC2086
  python3 bench/attention/bench_attention.py --lib $build/bench/attention/libft_attention.so \
    --out "$OUT" --commit "${FT_COMMIT:-unknown}" \
    --impls flashtrain_flash,flashtrain_flash_det,torch_flash,torch_cudnn ${ATTN_ARGS:-} \
    >"$OUT/attnbench.log" 2>&1
  echo "attnbench rc=$?"; grep -E "^(D=|sanity)" "$OUT/attnbench.log" | tail -60
fi
if [[ " $steps " == *" test "* ]] && [ ! -f $build/CTestTestfile.cmake ]; then
  # Unpacked binaries: each test binary in turn, its summary lines.
  rc=0
  for t in $build/tests/ft_*_tests; do
    timeout "${CTEST_TIMEOUT:-600}" "$t" --gtest_brief=1 >"$OUT/$(basename "$t").log" 2>&1 || rc=1
    echo "$(basename "$t"): $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$(basename "$t").log" | tr '\n' ' ')"
  done
  echo "tests rc=$rc"
elif [[ " $steps " == *" test "* ]]; then
  ctest --test-dir $build --output-on-failure -j 4 --timeout "${CTEST_TIMEOUT:-600}" >"$OUT/ctest.log" 2>&1
  rc=$?
  grep -E "tests passed|tests failed|\*\*\*Failed|Failed|Not Run|Timeout" "$OUT/ctest.log" | head -40
  grep -c "Skipped" "$OUT/ctest.log" | sed 's/^/skipped tests: /'
  echo "ctest rc=$rc"
fi
if [[ " $steps " == *" bench "* ]]; then
  FT_COMMIT=${FT_COMMIT:-unknown} ./$build/bench/bench_ops --out "$OUT" 2>&1 | tee "$OUT/bench_ops.log" | tail -40
fi
if [[ " $steps " == *" crosscheck "* ]]; then
  scripts/gpu_cross_check.sh $build "${KJV_DIR:-.gpu/kjv}" 2>&1 | tee "$OUT/crosscheck.log" | tail -12
  echo "crosscheck rc=${PIPESTATUS[0]}"
fi
if [[ " $steps " == *" trainbench "* ]]; then
  bench/train/train_bench.sh $build "${KJV_DIR:-.gpu/kjv}" "$OUT/trainbench" 2>&1 | tail -45
fi
