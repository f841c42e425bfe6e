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
# Usage (repo root, .gpu carried): bench/train/dev/pair_probe_call.sh   (STEPS, default 150; PROBE)
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
[ -d .gpu/bpe ] && export FLASHTRAIN_BPE_DIR=$PWD/.gpu/bpe
source scripts/gpu_unpack.sh
gpu_unpack || exit 1
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
