#!/usr/bin/env bash
# Issue 20, session 20's open question: two coupled ranks add about 1 ms to a GPT-2-small step that
# neither data motion (the no-copy experiment, call O) nor the busy machine (two independent runs
# side by side, call P) explains (bench/train/NOTES.md, session 20). One call on a machine with 2+
# GPUs, binaries carried (scripts/gpu_pack_bins.sh build flashtrain), FLASHTRAIN_STEP_TIMING=1:
#   1. one GPU alone, on GPU 0 and on GPU 1;
#   2. both at once, two independent one-GPU runs;
#   3. two ranks, ZeRO-1 over the copy engines (the default): every rank prints its timing, and the
#      micro-steps split where the backward ends (StepTimer::mark_backward_done): compute against
#      what follows it (last copies, the collectives, waiting for the other rank);
#   4. two ranks without ZeRO-1, the all-reduce after the graph replay: no collective inside the
#      micro-steps at all, so their excess over one GPU is not waiting.
# PROBE=forks instead (session 21: does each bucket's fork from the compute stream cost the
# captured backward?): two ranks of ZeRO-1 on the copy engines at allreduce_bucket_mb 25 (the
# default), 100 and 6.25 (about 20, 6 and 80 forks a step), with one copy stream instead of four,
# and the default again.
# PROBE=streams: one, two and four copy streams (FLASHTRAIN_PEER_COPY_STREAMS), interleaved, twice.
# PROBE=trace: per-kernel durations (bench/profile/kernel_trace.cpp) of each card alone and of each
# rank of ZeRO-1 and of plain data parallelism, each rank against its card alone.
# PROBE=nogather (the experiment build 8c85237): ZeRO-1 with and without the working copy's gather (the
# optimizer phase without its copies: what overlapping them with the next forward could hide), twice.
# PROBE=rounds: ZeRO-1 (copy engines) in 4 (the default), 8 and 16 rounds (FLASHTRAIN_ZERO1_ROUNDS), twice.
# PROBE=clocks: each card alone, ZeRO-1 and plain, twice, with both cards' SM clock, power and power-cap
# flag sampled every 50 ms (bench/train/dev/clock_summary.py: means over the busy samples).
# PROBE=onebucket: ZeRO-1 on the copy engines with buckets of 25 MiB (the default) against one bucket
# of all the gradients (one fork, after the backward), and plain data parallelism, interleaved twice.
# Usage (repo root, .gpu carried): bench/train/dev/pair_probe_call.sh   (STEPS, default 150; PROBE)
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
[ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
source scripts/gpu_unpack.sh
# The carried binaries, unless flashtrain was built on the device after they came (a build there).
if [ ! -x build-gpu/flashtrain ] || [ .gpu/bins.tar.xz -nt build-gpu/flashtrain ]; then gpu_unpack || exit 1; fi
data=${KJV_DIR:-.gpu/kjv}
source bench/train/gpt2_dp_args.sh
run() {  # LABEL NPROC ZERO1 [CUDA_VISIBLE_DEVICES] [--set KEY=VALUE ...]
  local r=/tmp/pair-$1-$RANDOM nproc=() gpu=()
  [ "$2" -gt 1 ] && nproc=(--nproc "$2")
  [ -n "${4:-}" ] && gpu=(CUDA_VISIBLE_DEVICES="$4")  # unset otherwise: an empty value hides every GPU
  local extra=("${@:5}")
  gpt2_dp_args "${STEPS:-150}" 50 "$r" "$data"
  env "${gpu[@]}" FLASHTRAIN_STEP_TIMING=1 timeout 200 build-gpu/flashtrain train configs/gpt2-small.yaml \
    "${nproc[@]}" "${GPT2_DP_ARGS[@]}" --set compile_model=true --set zero1="$3" "${extra[@]}" 2>&1 |
    grep -E "step timing|rror" | sed "s/^flashtrain: /$1: /"
}
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
if [ "${PROBE:-pair}" = trace ]; then  # session 22 (not yet run): which kernels run slower on a coupled rank?
  # bench/profile/kernel_trace.cpp's per-kernel durations of each card alone, of two ZeRO-1 ranks and
  # of two plain ranks (STEPS 60 by default here: the traces hold every kernel), then each rank's
  # kernels against its card's alone (kernel_trace_summary.py compare). Needs the tracer built
  # (cmake --build build-gpu --target ft_kernel_trace) or carried in build-gpu/bench/profile/.
  lib=$(realpath build-gpu/bench/profile/libft_kernel_trace.so) || exit 1
  traced() {  # LABEL then run()'s arguments; the run's traces in /tmp/trace-LABEL/
    rm -rf "/tmp/trace-$1"
    CUDA_INJECTION64_PATH=$lib FT_KERNEL_TRACE_DIR=/tmp/trace-$1 STEPS=${STEPS:-60} run "$@"
  }
  rank_trace() {  # DIR DEVICE: the trace file of the process that ran on DEVICE
    for f in "$1"/trace-*.tsv; do
      [ "$(awk -F'\t' 'NR > 1 {c[$1]++} END {m = -1; for (d in c) if (c[d] > m) {m = c[d]; b = d}; print b}' "$f")" = "$2" ] && echo "$f"
    done | head -1
  }
  traced gpu0 1 false 0
  traced gpu1 1 false 1
  traced zero1 2 true ""
  traced plain 2 false ""
  for mode in zero1 plain; do
    for d in 0 1; do
      echo "== $mode rank $d against GPU $d alone"
      coupled=$(rank_trace /tmp/trace-$mode $d) alone=$(ls /tmp/trace-gpu$d/trace-*.tsv | head -1)
      : > "${OUT:-/tmp}/trace-$mode-rank$d.md"
      for view in "--top 15" --parts; do  # per kernel, then per part of the step
        # shellcheck disable=SC2086
        python3 bench/profile/kernel_trace_summary.py compare "$coupled:$d" "$alone" $view |
          tee -a "${OUT:-/tmp}/trace-$mode-rank$d.md"
      done
    done
  done
  exit 0
fi
if [ "${PROBE:-pair}" = nogather ]; then  # experiment build only (FLASHTRAIN_EXP_NO_GATHER): wrong parameters
  for round in 1 2; do
    run gather-$round 2 true ""
    FLASHTRAIN_EXP_NO_GATHER=1 run no-gather-$round 2 true ""
  done
  run gpu0 1 false 0
  exit 0
fi
if [ "${PROBE:-pair}" = rounds ]; then  # session 22: finer ZeRO-1 rounds expose less of the last round's copies
  for round in 1 2; do
    for k in 4 8 16; do FLASHTRAIN_ZERO1_ROUNDS=$k run rounds-$k-$round 2 true ""; done
  done
  run gpu0 1 false 0
  exit 0
fi
if [ "${PROBE:-pair}" = clocks ]; then  # session 22: is the coupled rank's slower backward a lower clock?
  clocked() {  # LABEL then run()'s arguments: the run, with both cards' clocks sampled every 50 ms
    local log=/tmp/clocks-$1.csv
    nvidia-smi --query-gpu=index,utilization.gpu,clocks.sm,power.draw,$capq \
      --format=csv,noheader,nounits -lms 50 > "$log" & local smi=$!
    run "$@"; kill $smi; wait $smi 2>/dev/null
    python3 bench/train/dev/clock_summary.py "$1" "$log"
  }
  capq=clocks_event_reasons.sw_power_cap  # older drivers: clocks_throttle_reasons
  nvidia-smi --query-gpu=$capq --format=csv,noheader >/dev/null 2>&1 || capq=clocks_throttle_reasons.sw_power_cap
  nvidia-smi --query-gpu=index,power.limit,clocks.max.sm --format=csv,noheader
  for round in 1 2; do
    clocked gpu0-$round 1 false 0
    clocked gpu1-$round 1 false 1
    clocked zero1-$round 2 true ""
    clocked plain-$round 2 false ""
  done
  exit 0
fi
if [ "${PROBE:-pair}" = onebucket ]; then  # session 22: do forks during the backward slow it? one bucket forks once, at its end
  for round in 1 2; do
    run buckets-25-$round 2 true ""
    run one-bucket-$round 2 true "" --set allreduce_bucket_mb=4000
    run plain-$round 2 false ""
  done
  run gpu0 1 false 0
  run gpu1 1 false 1
  exit 0
fi
if [ "${PROBE:-pair}" = streams ]; then  # session 21: one copy stream against four (the default), interleaved
  for round in 1 2; do
    run four-copy-streams-$round 2 true ""
    FLASHTRAIN_PEER_COPY_STREAMS=1 run one-copy-stream-$round 2 true ""
    FLASHTRAIN_PEER_COPY_STREAMS=2 run two-copy-streams-$round 2 true ""
  done
  run gpu0 1 false 0
  run gpu1 1 false 1
  exit 0
fi
if [ "${PROBE:-pair}" = forks ]; then
  run buckets-25 2 true ""
  run buckets-100 2 true "" --set allreduce_bucket_mb=100
  run buckets-6.25 2 true "" --set allreduce_bucket_mb=6.25
  FLASHTRAIN_PEER_COPY_STREAMS=1 run one-copy-stream 2 true ""
  run buckets-25-again 2 true ""
  run gpu0 1 false 0
  exit 0
fi
run gpu0 1 false 0
run gpu1 1 false 1
run side-by-side-gpu0 1 false 0 & run side-by-side-gpu1 1 false 1; wait
run zero1-copy-engines 2 true
run plain-allreduce-after-replay 2 false
run zero1-copy-engines-again 2 true
run gpu0-again 1 false 0
