#!/usr/bin/env bash
# One device call: build the attention kernels, the GPU + CPU tests and the benchmark library with
# nvcc directly (no CMake), run the tests, then the benchmark (mode: dev | full | tests).
# Usage (repo root, on the GPU machine): [PROFILE=1] [SKIP_BUILD=1] bench/attention/dev/gpu_dev.sh MODE (dev|all|full|bench|tests|none)
# GoogleTest comes from the machine if it has one, else from build_attn_deps/ (carried).
set -uo pipefail
MODE=${1:-dev}
OUTDIR=${OUT:-/tmp/attn_out}
mkdir -p "$OUTDIR" build_attn
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
NVCC="nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DFT_FLASH_WGMMA=1 -I. -Xcompiler -fPIC"
GT_INC=""; GT_LIB="-lgtest -lgtest_main"
if [ ! -f /usr/include/gtest/gtest.h ] && [ ! -f /usr/local/include/gtest/gtest.h ]; then
  GT_INC="-Ibuild_attn_deps/include"; GT_LIB="build_attn_deps/lib/libgtest_main.a build_attn_deps/lib/libgtest.a"
fi
t0=$(date +%s)
if [ "${SKIP_BUILD:-0}" != 1 ]; then  # SKIP_BUILD=1: reuse build_attn/ from an earlier run in this call
pids=()
for f in ops/cuda/attention/flash_fwd_hdim64 ops/cuda/attention/flash_bwd_hdim64 \
         ops/cuda/attention/flash_fwd_hdim128 ops/cuda/attention/flash_bwd_hdim128 \
         ops/cuda/attention/flash_attention ops/cuda/naive_attention bench/attention/attention_capi; do
  o=build_attn/$(basename $f).o
  ($NVCC -Xptxas -v -c $f.cu -o $o > build_attn/$(basename $f).log 2>&1 || { echo "BUILD FAIL $f"; cat build_attn/$(basename $f).log | grep -v "^ptxas info" | head -30; }) &
  pids+=($!)
done
# BASE_TAR (a `git archive` of an earlier commit, carried): its benchmark library too, timed in the
# same process as base_flash / base_flash_det (bench_attention.py --base-lib; add them to --dev-refs).
if [ -n "${BASE_TAR:-}" ] && [ -f "${BASE_TAR}" ]; then
  rm -rf /tmp/ft_base && mkdir -p /tmp/ft_base/build && tar -xf "$BASE_TAR" -C /tmp/ft_base
  (cd /tmp/ft_base && bp=() && for f in ops/cuda/attention/flash_fwd_hdim64 ops/cuda/attention/flash_bwd_hdim64 \
       ops/cuda/attention/flash_fwd_hdim128 ops/cuda/attention/flash_bwd_hdim128 \
       ops/cuda/attention/flash_attention ops/cuda/naive_attention bench/attention/attention_capi; do
     $NVCC -c $f.cu -o build/$(basename $f).o & bp+=($!); done; wait "${bp[@]}" &&
   nvcc -shared -o build/libft_attention.so build/*.o -lcublas && echo "base library built" || echo "BASE BUILD FAIL") &
  pids+=($!)
fi
g++ -O2 -std=c++17 -I. $GT_INC -c ops/cpu/attention_reference.cpp -o build_attn/attention_reference.o &
nvcc -O2 -std=c++17 -DFT_FLASH_WGMMA=1 -I. $GT_INC -c tests/ops/attention_cuda_test.cu -o build_attn/attention_cuda_test.o &
g++ -O2 -std=c++17 -I. $GT_INC -c tests/ops/attention_cpu_test.cpp -o build_attn/attention_cpu_test.o &
wait
echo "compile: $(( $(date +%s) - t0 )) s"
grep -h -B1 "spill" build_attn/flash_*.log | grep -E "[1-9][0-9]* bytes spill" | sort | uniq -c | head
K="build_attn/flash_fwd_hdim64.o build_attn/flash_bwd_hdim64.o build_attn/flash_fwd_hdim128.o build_attn/flash_bwd_hdim128.o build_attn/flash_attention.o build_attn/naive_attention.o"
g++ -o build_attn/attention_cpu_test build_attn/attention_cpu_test.o build_attn/attention_reference.o $GT_LIB -pthread || echo "LINK FAIL cpu test"
nvcc -o build_attn/attention_cuda_test build_attn/attention_cuda_test.o build_attn/attention_reference.o $K $GT_LIB -lcublas -Xcompiler -pthread || echo "LINK FAIL cuda test"
nvcc -shared -o build_attn/libft_attention.so build_attn/attention_capi.o $K -lcublas || echo "LINK FAIL capi"
fi

BENCH="python3 bench/attention/bench_attention.py --lib build_attn/libft_attention.so --out $OUTDIR"
[ -f /tmp/ft_base/build/libft_attention.so ] && BENCH="$BENCH --base-lib /tmp/ft_base/build/libft_attention.so"
export PYTHONUNBUFFERED=1
if [ "$MODE" != "bench" ] && [ "${SKIP_TESTS:-0}" != 1 ]; then
  build_attn/attention_cpu_test --gtest_brief=1 2>&1 | tail -5
  timeout ${TEST_TIMEOUT:-130} build_attn/attention_cuda_test --gtest_brief=1 --gtest_output=xml:$OUTDIR/attention_cuda_test.xml 2>&1 | tail -40
fi
# PROFILE=1: Nsight Compute on the backward (and forward) kernels of profile_bwd.py, T=4096,
# p = 0 and 0.1 (clocks left alone); a text report and the SASS of the backward kernel to $OUT.
# PROFILE_ARGS="4096 torch" PROFILE_REGEX="flash_bwd_kernel|flash_bwd_dq_dk_dv" profiles
# PyTorch's FlashAttention-2 backward beside ours.
if [ "${PROFILE:-0}" = 1 ]; then
  cuobjdump -sass build_attn/flash_bwd_hdim64.o > $OUTDIR/bwd_sass.txt 2>&1
  grep -c "HMMA" $OUTDIR/bwd_sass.txt
  grep -oE "(RED|ATOM|ATOMG|LDSM|STS|LDS|SHFL|MUFU|BAR)[.A-Z0-9_]*" $OUTDIR/bwd_sass.txt | sort | uniq -c | sort -rn | head -20
  timeout ${PROFILE_TIMEOUT:-90} ncu --clock-control none -k regex:"${PROFILE_REGEX:-flash_(bwd|fwd)_kernel}" -c ${PROFILE_COUNT:-4} \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section InstructionStats --section SourceCounters -o $OUTDIR/prof \
    python3 bench/attention/dev/profile_bwd.py build_attn/libft_attention.so ${PROFILE_ARGS:-} > $OUTDIR/ncu_run.log 2>&1
  tail -3 $OUTDIR/ncu_run.log
  ncu --import $OUTDIR/prof.ncu-rep --page details > $OUTDIR/ncu_details.txt 2>&1
  grep -E "flash_|Duration|Throughput|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Stall|Bank" $OUTDIR/ncu_details.txt | head -80
fi
case "$MODE" in
  dev) timeout ${DEV_TIMEOUT:-70} $BENCH --dev ${DEV_ARGS:-} 2>&1 | tee $OUTDIR/dev.log ;;
  all) timeout ${DEV_TIMEOUT:-70} $BENCH --dev ${DEV_ARGS:-} 2>&1 | tee $OUTDIR/dev.log
       timeout ${FULL_TIMEOUT:-180} $BENCH ${BENCH_ARGS:-} 2>&1 | tee $OUTDIR/bench.log ;;
  full|bench) timeout ${FULL_TIMEOUT:-380} $BENCH ${BENCH_ARGS:-} 2>&1 | tee $OUTDIR/bench.log ;;
  none) ;;
esac
echo "total: $(( $(date +%s) - t0 )) s"
