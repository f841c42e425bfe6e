#!/usr/bin/env bash
# Device calls for the warp-specialised Hopper backward (flash_bwd_ws_kernel.cuh; issue 18), in the
# order that finds its faults cheapest. Stages (default: all; more than one 10-minute call, so run
# `build tests bench64` in one call and `bench128 train` in the next on the same warm machine, whose
# build-gpu/ stays):
#   build     cmake, the targets ft_ops_tests, ft_attention_capi, flashtrain (2-3 min on 16 cores)
#   tests     the building blocks' tests (flash_tma_cuda_test.cu) in their own process, then the
#             kernel's GPU tests under a short timeout (an mbarrier parity or byte-count mistake
#             would hang; the kernel traps after 4M failed tries); after a trap, a rebuild with
#             FT_MBARRIER_TIMEOUT_PRINT names the barrier on one small case; memcheck on a few cases
#   bench64   variants 0, 42, 4, 43 (shipped atomic, ws atomic, shipped deterministic, ws fixed-point)
#             against PyTorch's flash and cuDNN backends, D = 64, T = 1024, 4096, 16384
#   bench128  variants 0, 42 at D = 128
#   train     GPT-2-small, T = 1024, B = 16, 40 steps, shipped backward and ws
#             (FLASHTRAIN_FLASH_BWD_WS_MIN_T=0): dropout 0.1 deterministic and atomic, dropout 0
#   profile   Nsight Compute on one ws backward kernel and one shipped one (T = 4096, p = 0 and
#             0.1, variants 42 and 0; bench/attention/dev/profile_bwd.py): a text report to $OUT
# Stages for a kernel change built here instead (session 16; scripts/gpu_carry.sh's machine builds
# for sm_90a too, and binaries travel smaller than a build takes on the GPU machine):
#   unpack    .gpu/bins.tar.xz: build-gpu/ (ft_ops_tests, flashtrain, libft_attention.so, the
#             yaml-cpp it was linked against) and build-base/libft_attention.so (the commit before);
#             WS_LIB and WS_BASE_LIB name other libraries for bits and ab (e.g. an experiment's
#             build-exp/libft_attention.so against build-gpu's)
#   opstests  the whole ft_ops_tests (every attention test, each kernel against float64 / naive)
#   fwd       the warp-specialised FORWARD (flash_fwd_ws_kernel.cuh, written in session 16 without a
#             GPU, off by default): its tests under a timeout (a hang traps after 4M tries), then
#             bench --dev variants 0, 46 (plain), 47 (intra-warpgroup overlap), 48 (ping-pong), 49
#             (both) against cuDNN, D = 64 and 128, T = 1024, 4096, 16384 (check_variants compares
#             each with variant 0 first)
#   bits      dq_bits.py: the deterministic backward of build-gpu/'s library and build-base/'s, bit
#             for bit (for changes that must keep every bit)
#   ab        bench --dev D = 64 and 128: this build's variants 0, 4 (shipped), 42, 43 (ws atomic /
#             fixed at every T), 44, 45 (the dispatch without ws), the base build's 42, 43 and cuDNN
#   forms     the forward's forms (session 17): its and the backward's tests, variants 0, 46-53 at
#             D = 64 and 128 against cuDNN
#   fwd3      the forward with 3 consumer warpgroups (session 17): variants 0, 46, 47, 57, 58 at D = 64
#   profdq    Nsight Compute on the ws backward with atomic and fixed-point dQ (variants 42, 43) with
#             SourceCounters: where the fixed point's 18% goes (session 17's next step)
#   train2    GPT-2-small as in train, shipped dispatch against ws off (FLASHTRAIN_FLASH_BWD_WS_MIN_T
#             past T), dropout 0.1 and 0, deterministic and atomic, and p = 0 with the ordered dQ
# Usage (repo root, on an H100/H200, .gpu carried): bench/attention/dev/ws_call.sh [stage...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/ws_call}; mkdir -p "$OUT"
steps=${*:-build tests bench64 bench128 train}  # profile: only when named
has() { [[ " $steps " == *" $1 "* ]]; }
[ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
[ -d .gpu/pcre2 ] && export PKG_CONFIG_PATH=$PWD/.gpu/pcre2/lib/pkgconfig
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
ws_lib=${WS_LIB:-build-gpu/bench/attention/libft_attention.so}
ws_base_lib=${WS_BASE_LIB:-build-base/libft_attention.so}
if has unpack; then
  source scripts/gpu_unpack.sh
  gpu_unpack || exit 1
fi
if has opstests; then
  timeout 420 build-gpu/tests/ft_ops_tests --gtest_brief=1 > "$OUT/ops_tests.log" 2>&1
  echo "ft_ops_tests rc=$?"; grep -E "PASSED|FAILED|Failure|tests ran" "$OUT/ops_tests.log" | head -30
fi

if has build; then
  t0=$(date +%s)
  { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a &&
    cmake --build build-gpu -j "$(nproc)" --target ft_ops_tests ft_attention_capi flashtrain; } > "$OUT/build.log" 2>&1 ||
    { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
fi

if has tests; then
  timeout 90 build-gpu/tests/ft_ops_tests --gtest_filter="FlashTmaCuda.*:FlashCuda.WsBackwardTakesItsCalls" 2>&1 |
    grep -E "OK|FAILED|Failure|Expected|Which|largest|differ" | head -20
  filter='FlashTmaCuda.*:FlashCuda.WsBackward*:FlashCudaDispatch.*:Cases/FlashCudaWsBackward.*:AttentionGqaCuda.*'
  timeout 240 build-gpu/tests/ft_ops_tests --gtest_filter="$filter" --gtest_brief=1 > "$OUT/ws_tests.log" 2>&1
  rc=$?
  echo "ws tests rc=$rc (124: a hang)"; grep -E "FAILED|PASSED|Failure|error" "$OUT/ws_tests.log" | head -30
  if [ $rc -ne 0 ] && grep -qE "launch failure|unspecified launch|illegal|trap" "$OUT/ws_tests.log"; then
    { cmake -S . -B build-dbg -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
        -DCMAKE_CUDA_FLAGS=-DFT_MBARRIER_TIMEOUT_PRINT && cmake --build build-dbg -j "$(nproc)" --target ft_ops_tests; } \
      > "$OUT/build-dbg.log" 2>&1
    timeout 60 build-dbg/tests/ft_ops_tests --gtest_filter='Cases/FlashCudaWsBackward.WithinTwiceNaiveError/B2_H3_T64_D64_causal_p0_bf16' \
      2>&1 | grep -E "timed out|OK|FAILED|error" | head -12
  fi
  if command -v compute-sanitizer >/dev/null; then
    timeout 120 compute-sanitizer --tool memcheck build-gpu/tests/ft_ops_tests \
      --gtest_filter='Cases/FlashCudaWsBackward.WithinTwiceNaiveError/*T17_*' > "$OUT/ws_memcheck.log" 2>&1
    echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|Invalid" "$OUT/ws_memcheck.log" | head -5
  fi
fi

bench() {  # $1 head dim, $2 variants
  timeout 240 python3 bench/attention/bench_attention.py --lib build-gpu/bench/attention/libft_attention.so \
    --out /tmp/ws_bench --dev --ds "$1" --variants "$2" --dev-ts 1024,4096,16384 --dev-refs torch_flash,torch_cudnn \
    > "$OUT/ws_bench_d$1.log" 2>&1
  echo "bench D=$1 rc=$?"; grep -E "^(dev|sanity|check)|variant" "$OUT/ws_bench_d$1.log" | sed -E 's/ \([0-9]+ TF\)//g' | head -40
}
has bench64 && bench 64 0,42,4,43
has bench128 && bench 128 0,42
if has fwd; then
  timeout 240 build-gpu/tests/ft_ops_tests --gtest_brief=1 \
    --gtest_filter='Cases/FlashCudaWsForward.*:FlashCuda.WsForward*:FlashCudaDispatch.WsForward*' > "$OUT/ws_fwd_tests.log" 2>&1
  echo "ws forward tests rc=$? (124: a hang)"; grep -E "PASSED|FAILED|Failure|error" "$OUT/ws_fwd_tests.log" | head -20
  # Grouped-query attention and the other suites through it too (the threshold moved for the process).
  FLASHTRAIN_FLASH_FWD_WS_MIN_T=0 timeout 240 build-gpu/tests/ft_ops_tests --gtest_brief=1 \
    --gtest_filter='AttentionGqaCuda.*:FlashCuda.*:-FlashCuda.WsForwardTakesItsCalls' > "$OUT/ws_fwd_gqa.log" 2>&1
  echo "suites with the ws forward everywhere rc=$?"; grep -E "PASSED|FAILED|Failure|error" "$OUT/ws_fwd_gqa.log" | head -20
  for d in 64 128; do
    timeout 200 python3 bench/attention/bench_attention.py --lib build-gpu/bench/attention/libft_attention.so \
      --out /tmp/ws_fwd --dev --ds $d --variants 0,46,47,48,49 --dev-ts 1024,4096,16384 --dev-refs torch_cudnn \
      > "$OUT/ws_fwd_d$d.log" 2>&1
    echo "fwd D=$d rc=$?"; grep -E "^(dev|check)" "$OUT/ws_fwd_d$d.log" | grep -v " OK$" | sed -E 's/ \([0-9]+ TF\)//g' | head -40
  done
fi
if has forms; then
  # Session 17: the forward's K and V released separately (k_empty / v_empty) and a 3-stage ring:
  # its tests (the dispatch's form), the backward's (taking turns at the summed dQ with dropout), and
  # variants 46-49 (2 stages: plain, overlap, ping-pong, both) and 50-53 (3 stages), each checked
  # against variant 0 first, at D = 64 and 128 (p = 0.1 rows: the ws forward does not take dropout).
  filter='Cases/FlashCudaWsForward.*:FlashCuda.Ws*:FlashCudaDispatch.*:Cases/FlashCudaWsBackward.*:AttentionGqaCuda.*'
  timeout 300 build-gpu/tests/ft_ops_tests --gtest_brief=1 --gtest_filter="$filter" > "$OUT/ws_forms_tests.log" 2>&1
  echo "ws tests rc=$? (124: a hang)"; grep -E "PASSED|FAILED|Failure|error" "$OUT/ws_forms_tests.log" | head -20
  for d in 64 128; do
    timeout 240 python3 bench/attention/bench_attention.py --lib build-gpu/bench/attention/libft_attention.so \
      --out /tmp/ws_forms --dev --ds $d --variants 0,46,47,48,49,50,51,52,53 --dev-ts 1024,2048,4096,16384 \
      --dev-refs torch_cudnn > "$OUT/ws_forms_d$d.log" 2>&1
    echo "forms D=$d rc=$?"; grep -E "^(dev|check)" "$OUT/ws_forms_d$d.log" | grep -v " OK$" | grep -v "p=0.1" |
      sed -E 's/ \([0-9]+ TF\)//g; s/ bwd [0-9.]+ ms fwdbwd [0-9.]+ ms//' | head -60
  done
fi
if has fwd3; then
  # Session 17: the forward with 3 consumer warpgroups (192 rows; variants 57 plain, 58 overlap)
  # against the wgmma forward (0), the ws forward's 2-consumer forms (46, 47) and cuDNN, D = 64.
  timeout 240 python3 bench/attention/bench_attention.py --lib build-gpu/bench/attention/libft_attention.so \
    --out /tmp/ws_fwd3 --dev --ds 64 --variants 0,46,47,57,58 --dev-ts 1024,2048,4096,16384 \
    --dev-refs torch_cudnn > "$OUT/ws_fwd3.log" 2>&1
  echo "fwd3 rc=$?"; grep -E "^(dev|check)" "$OUT/ws_fwd3.log" | grep -v " OK$" | grep -v "p=0.1" |
    sed -E 's/ \([0-9]+ TF\)//g; s/ bwd [0-9.]+ ms fwdbwd [0-9.]+ ms//' | head -40
fi
if has bits; then
  FLASHTRAIN_DETERMINISTIC_DQ=fixed timeout 150 python3 bench/attention/dev/dq_bits.py \
    "$ws_lib" "$ws_base_lib" > "$OUT/dq_bits.log" 2>&1
  echo "dq_bits rc=$? (0: identical)"; tail -3 "$OUT/dq_bits.log"
fi
if has ab; then
  for d in 64 128; do
    timeout 280 python3 bench/attention/bench_attention.py --lib "$ws_lib" \
      --base-lib "$ws_base_lib" --base-variants 42,43 --out /tmp/ws_ab --dev --ds $d \
      --variants 0,4,42,43,44,45 --dev-ts 1024,4096,16384 --dev-refs base_v42,base_v43,torch_cudnn \
      > "$OUT/ws_ab_d$d.log" 2>&1
    echo "ab D=$d rc=$?"; grep -E "^(dev|check)" "$OUT/ws_ab_d$d.log" | grep -v " OK$" | sed -E 's/ \([0-9]+ TF\)//g' | head -60
  done
fi

data=${KJV_DIR:-.gpu/kjv}
train() {  # $1 label, $2 ws threshold ("" = default), $3 dropout, $4 deterministic
  local run=/tmp/ws-train-$1; rm -rf $run
  FLASHTRAIN_FLASH_BWD_WS_MIN_T=$2 timeout 150 build-gpu/flashtrain train configs/gpt2-small.yaml --set max_seq_len=1024 \
    --set batch_size=16 --set dropout=$3 --set deterministic=$4 --set gradient_accumulation_steps=1 --set max_steps=40 \
    --set log_interval=10 --set eval_interval=0 --set checkpoint_interval=0 --set keep_checkpoints=1 --set out_dir=$run \
    --set train_data="$data/train_*.bin" --set val_data="$data/val_*.bin" > "/tmp/ws-train-$1.log" 2>&1
  echo "$1 (rc $?): $(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if '\"loss\"' in l]; print(' '.join('%.4f' % x['loss'] for x in r), '| tokens/s', r[-1].get('tokens_per_s'))" $run/metrics.jsonl 2>&1)"
}
if has train; then
  { for cfg in "0.1 true" "0.1 false" "0 true"; do
      set -- $cfg
      train shipped-p$1-det$2 "" $1 $2
      train ws-p$1-det$2 0 $1 $2
    done; } | tee "$OUT/ws_train.log"
fi
if has train2; then
  { for cfg in "0.1 true" "0.1 false" "0 true" "0 false"; do
      set -- $cfg
      train default-p$1-det$2 "" $1 $2
      train no-ws-p$1-det$2 1000000 $1 $2
    done
    FLASHTRAIN_DETERMINISTIC_DQ=ordered train ordered-p0-dettrue "" 0 true; } | tee "$OUT/ws_train2.log"
fi

# Nsight Compute on the backward at T = 4096 (bench/attention/dev/profile_bwd.py: p = 0 and 0.1, two
# launches), under a timeout of NCU_TIMEOUT seconds (280): ncu_bwd VARIANT KERNEL_REGEX OUT_NAME SUMMARY_REGEX SECTION...
ncu_bwd() {
  local v=$1 kernels=$2 name=$3 summary=$4; shift 4
  local sections=(); for s in "$@"; do sections+=(--section "$s"); done
  FT_VARIANT=$v timeout "${NCU_TIMEOUT:-280}" ncu --kernel-name regex:"$kernels" --launch-count 2 "${sections[@]}" \
    python3 bench/attention/dev/profile_bwd.py build-gpu/bench/attention/libft_attention.so 4096 > "$OUT/$name" 2>&1
  echo "ncu variant $v rc=$?"; grep -E "flash_bwd|Duration|$summary" "$OUT/$name" | head -16
}
if has profdq; then
  # Where the fixed-point dQ's cost goes (bench/attention/NOTES.md, session 17's "Next"): the ws
  # backward with the atomic dQ (42) and the fixed point (43), with the stall reasons per source line
  # (SourceCounters) and the instruction mix.
  for v in 42 43; do
    ncu_bwd $v 'flash_bwd_ws_kernel' "ncu_dq_v$v.txt" 'Issue Slots Busy|No Eligible|Warp Cycles Per Issued' \
      SpeedOfLight WarpStateStats SchedulerStats InstructionStats SourceCounters
  done
fi
if has profile; then
  for v in 42 0; do
    NCU_TIMEOUT=240 ncu_bwd $v 'flash_bwd_(ws_|wide_)?kernel' "ncu_v$v.txt" 'Compute \(SM\) Throughput|Memory Throughput|Registers Per' \
      SpeedOfLight Occupancy LaunchStats WarpStateStats MemoryWorkloadAnalysis
  done
fi
