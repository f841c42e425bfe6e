#!/usr/bin/env bash
# Issue 20, session 19: ZeRO-1's reduce-scatter on the copy engines (zero1_transport: copy_engines,
# train/zero1.h) against the NCCL one, on a machine with 2+ GPUs. Binaries built elsewhere and
# carried (scripts/gpu_pack_bins.sh build flashtrain tests/ft_train_tests). Stages (default: all):
#   unpack  .gpu/bins.tar.xz into build-gpu/
#   test    the DataParallelCuda suite (ZeRO-1 now takes the copy engines by default: bit-equal to
#           plain data parallelism, resume, a killed rank), or TEST_FILTER's tests
#   timing  GPT-2-small T = 1024 B = 16 a GPU, FLASHTRAIN_STEP_TIMING=1, STEPS (100) steps: 1 GPU;
#           2 GPUs ZeRO-1 over NCCL (bf16 wire, 4 rounds: session 14's best) and over the copy
#           engines (fp32 and bf16 wire), compile_model on; losses printed to compare. When
#           build-base/flashtrain was packed (gpu_pack_bins.sh's BASE_BIN: the commit before), the
#           copy-engine fp32 run again with it, in the same call
#   gradtest  the norm / AdamW / elementwise GPU tests of ft_ops_tests (when packed)
#   scaling   bench/train/scaling.sh with ROWS=bars on each GPU count of SCALING_GPUS (default "2"),
#             results under $OUT/s<N>/
# Usage (repo root, .gpu carried): bench/train/dev/copy_engine_call.sh [stage...]
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/copy_engine_call}; mkdir -p "$OUT"
steps=${*:-unpack test timing}
has() { [[ " $steps " == *" $1 "* ]]; }
[ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
if has unpack; then
  source scripts/gpu_unpack.sh
  gpu_unpack || exit 1
fi
export LD_LIBRARY_PATH=$PWD/build-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if has gradtest && [ -x build-gpu/tests/ft_ops_tests ]; then
  build-gpu/tests/ft_ops_tests --gtest_filter='GradNorm*:AdamW*:Elementwise*' > "$OUT/gradtest.log" 2>&1
  echo "norm / AdamW / elementwise GPU tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" "$OUT/gradtest.log" | head -20
fi
if has test; then
  timeout 400 build-gpu/tests/ft_train_tests --gtest_filter="${TEST_FILTER:-DataParallelCuda.*}" \
    > "$OUT/test.log" 2>&1
  echo "data-parallel GPU tests (ZeRO-1 over the copy engines by default) rc=$?"
  grep -E "OK|FAILED|Failure|rel L2|error|Expected" "$OUT/test.log" | head -30
fi
if has timing; then
  data=${KJV_DIR:-.gpu/kjv}
  source bench/train/gpt2_dp_args.sh
  run() {  # LABEL GPUS ZERO1 COMPILE COPY_ENGINES WIRE [COPY_STREAMS] [BUILD_DIR]
    local r=/tmp/ce-$1; rm -rf "$r"
    local nproc=(); [ "$2" -gt 1 ] && nproc=(--nproc "$2")
    gpt2_dp_args "${STEPS:-100}" 20 "$r" "$data"
    FLASHTRAIN_PEER_COPY_STREAMS=${7:-} FLASHTRAIN_STEP_TIMING=1 timeout 200 "${8:-build-gpu}/flashtrain" train configs/gpt2-small.yaml \
      "${nproc[@]}" "${GPT2_DP_ARGS[@]}" --set zero1="$3" --set compile_model="$4" \
      --set zero1_transport="$([ "$5" = 1 ] && echo copy_engines || echo nccl)" \
      --set grad_reduce_dtype="$6" > "$OUT/$1.log" 2>&1
    echo "== $1 (rc $?): $(grep -m1 'done:' "$OUT/$1.log" | sed 's/.*loss [^,]*, //')"
    grep -E "step timing|reduce-scattered" "$OUT/$1.log" | sed 's/^flashtrain: /   /' | cut -c1-260
    python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if '\"loss\"' in l]; print('   losses', ' '.join('%.6f' % x['loss'] for x in r))" "$r/metrics.jsonl" 2>&1
    grep -E "error|Error|\[dist\]" "$OUT/$1.log" | head -5
  }
  run 1gpu 1 false true 0 fp32
  run z1-nccl-bf16 2 true true 0 bf16
  run z1-ce-fp32 2 true true 1 fp32
  [ -x build-base/flashtrain ] && run z1-ce-fp32-base 2 true true 1 fp32 "" build-base
  run z1-ce-bf16 2 true true 1 bf16
  [ -x build-base/flashtrain ] && run z1-ce-fp32-base-again 2 true true 1 fp32 "" build-base
  run z1-ce-fp32-again 2 true true 1 fp32
  run 1gpu-again 1 false true 0 fp32
fi
if has scaling; then
  for n in ${SCALING_GPUS:-2}; do
    mkdir -p "$OUT/s$n"
    ROWS=bars RESULTS_DIR=$OUT/s$n bench/train/scaling.sh build-gpu "${KJV_DIR:-.gpu/kjv}" /tmp/scaling-$n "$n" \
      > "$OUT/s$n/scaling.log" 2>&1
    echo "== scaling.sh on $n GPUs (rc $?)"; grep -E "^\| |bar|==" "$OUT/s$n/scaling.log" | tail -14
  done
fi
