#!/usr/bin/env bash
# One device call (session 3, deterministic backward): the attention kernels, their GPU tests and
# the benchmark library through gpu_dev.sh, while CMake builds the Tensor-level and autograd test
# binaries beside it; then those tests (attention only), then the benchmark (BENCH_MODE: dev|full).
# Usage (repo root, on the GPU machine, .gpu carried): bench/attention/dev/gpu_h4.sh
set -uo pipefail
OUTDIR=${OUT:-/tmp/attn_out}
mkdir -p "$OUTDIR"
t0=$(date +%s)
if [ "${CMAKE_TESTS:-1}" = 1 ]; then
  ( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DFT_BUILD_BENCH=OFF > "$OUTDIR/cmake.log" 2>&1 &&
    cmake --build build-gpu -j 9 --target ft_ops_tests ft_autograd_tests >> "$OUTDIR/cmake.log" 2>&1
    echo "cmake build rc $? after $(( $(date +%s) - t0 )) s" >> "$OUTDIR/cmake.log" ) &
  CMAKE_PID=$!
fi
TEST_TIMEOUT=${TEST_TIMEOUT:-200} bench/attention/dev/gpu_dev.sh tests
if [ "${CMAKE_TESTS:-1}" = 1 ]; then
  wait $CMAKE_PID
  grep -E "error|rc " "$OUTDIR/cmake.log" | head -20
  timeout 120 build-gpu/tests/ft_ops_tests --gtest_filter='*ttention*' 2>&1 | grep -E '^\[  (PASSED|FAILED)|tests ran|Failure' | head -20
  timeout 60 build-gpu/tests/ft_autograd_tests --gtest_filter='AttentionGrad*' 2>&1 | grep -E '^\[  (PASSED|FAILED|     OK)|tests ran|Failure' | head -20
fi
echo "before bench: $(( $(date +%s) - t0 )) s"
SKIP_BUILD=1 SKIP_TESTS=1 bench/attention/dev/gpu_dev.sh ${BENCH_MODE:-dev}
echo "gpu_h4 total: $(( $(date +%s) - t0 )) s"
