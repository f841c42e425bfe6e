#!/usr/bin/env bash
# Data-parallel scaling (issues 7 and 20): GPT-2-small (configs/gpt2-small.yaml), T = 1024, B = 16
# per GPU, one micro-batch per step, bf16, eval off, STEPS (>= 150) steps a run; flashtrain on 1 GPU
# and on N GPUs (`--nproc N`) over compile_model, zero1 and grad_reduce_dtype, and PyTorch DDP +
# torch.compile (bench/train/torch_ddp.py under torchrun, the nanoGPT-style model of
# torch_nanogpt.py) on 1 and N GPUs of the same machine in the same call.
#
# flashtrain rows (about 30 s each; the torch rows about 60-90 s with compilation):
#   1 GPU   compile_model true / false
#   N GPUs  compile_model true:  zero1 fp32 (zero1_transport auto: the copy engines on one host,
#           session 19's fastest), zero1 over NCCL with the bf16 reduce-scatter (session 14's), fp32,
#           bf16, zero1 bf16 (auto), and fp32 with
#           FLASHTRAIN_GRAPH_ALLREDUCE=1
#           (experimental: the all-reduces inside the captured step; by default they follow the
#           graph replay. Until session 12 such jobs hung at exit: the row is last)
#           compile_model false: fp32, bf16
# final_loss: the mean of the last 10 logged losses, for what an option does to the loss curve.
# tokens/s is the median of the per-interval rates in rank 0's metrics.jsonl after step 10 (the
# first intervals hold start-up and the captures); torch's is one timed stretch after 10 warm-up
# steps. peak_mib: rank 0's caching-allocator peak ("peak device memory" of the final line) and
# torch.cuda.max_memory_allocated.
# Writes OUT_DIR/scaling-rows.jsonl and, via bench/train/scaling_summary.py,
# bench/results/scaling-<card>.json {"card", "commit", "rows": [...]} and .md with the bars (when
# RESULTS_DIR is set: there instead).
#   bench/train/scaling.sh BUILD_DIR DATA_DIR OUT_DIR [N_GPUS (default: all)] [STEPS (default 150)]
# SKIP_TORCH=1 leaves the torch rows out (a machine without torch); GRAPH_ALLREDUCE_ROW=0 the
# experimental in-graph all-reduce row; ROWS=bars stops after the rows the bars need (flashtrain's
# best guess on 1 and N GPUs, torch on N: about 2.5 minutes instead of 8).
set -uo pipefail
source "$(dirname "$0")/gpt2_dp_args.sh"
build=${1:?build dir}; data=${2:?data dir}; outdir=${3:?out dir}
ngpu=${4:-$(nvidia-smi -L | wc -l)}; steps=${5:-150}
export NCCL_NVLS_ENABLE=0  # required on these machines: no NVLink multicast
mkdir -p "$outdir"
rows=$outdir/scaling-rows.jsonl
: > "$rows"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
# Rewritten after every row, so a run cut short by a time limit still leaves its results.
summary() {
  python3 bench/train/scaling_summary.py "$rows" --card "$card" --results "${RESULTS_DIR:-bench/results}" > "$outdir/scaling-table.md"
}

run() {  # run GPUS ZERO1 OVERLAP COMPILE GRAD_DTYPE [GRAPH_ALLREDUCE (1)] [ZERO1_TRANSPORT (auto)]
  local n=$1 z=$2 ov=$3 cm=$4 gd=$5 ga=${6:-0} zt=${7:-auto}
  local tag=g$n-z$z-o$ov-c$cm-$gd-ga$ga-$zt
  local run=$outdir/ft-$tag
  rm -rf "$run"
  local nproc=(); [ "$n" -gt 1 ] && nproc=(--nproc "$n")
  gpt2_dp_args "$steps" 5 "$run" "$data"
  FLASHTRAIN_DP_OVERLAP=$ov FLASHTRAIN_GRAPH_ALLREDUCE=$ga timeout 300 "$build/flashtrain" train configs/gpt2-small.yaml \
    "${nproc[@]}" "${GPT2_DP_ARGS[@]}" --set zero1="$z" --set compile_model="$cm" --set grad_reduce_dtype="$gd" \
    --set zero1_transport="$zt" > "$run.log" 2>&1
  local rc=$?
  echo "== flashtrain gpus=$n zero1=$z overlap=$ov compile_model=$cm grad_dtype=$gd graph_allreduce=$ga (rc $rc)"
  grep -E "data parallel|captured|done:|error" "$run.log" | tail -4
  python3 - "$run/metrics.jsonl" "$run.log" "$n" "$z" "$ov" "$cm" "$gd" "$ga" "$rc" >> "$rows" <<'PY'
import json, re, statistics, sys
metrics, log, n, z, ov, cm, gd, ga, rc = sys.argv[1:]
try:
    steps = [json.loads(l) for l in open(metrics) if '"tokens_per_s"' in l]
except OSError:
    steps = []
timed = [s["tokens_per_s"] for s in steps if s["step"] > 10] or [s["tokens_per_s"] for s in steps[1:]]
peak = re.findall(r"peak device memory ([0-9.]+) MiB", open(log).read())
tps = statistics.median(timed) if timed and rc == "0" else None
# The loss curve's end, to see what an option (the bf16 wire) does to training: the mean of the
# last 10 logged losses (every run of one world size sees the same data in the same order).
losses = [s["loss"] for s in steps if "loss" in s]
# ZeRO-1's transport as the run reports it (zero1_transport: auto picks the copy engines on one host).
transport = None
if z == "true":
    transport = "copy_engines" if "reduce-scattered on the copy engines" in open(log).read() else "nccl"
print(json.dumps({"impl": "flashtrain", "gpus": int(n), "compile_model": cm == "true", "zero1": z == "true",
                  "zero1_transport": transport,
                  "grad_dtype": gd, "overlap": ov == "1", "graph_allreduce": cm == "true" and ga == "1",
                  "tokens_per_s": tps,
                  "step_ms": 1000 * int(n) * 16 * 1024 / tps if tps else None,
                  "peak_mib": float(peak[-1]) if peak else None, "rc": int(rc),
                  "final_loss": statistics.mean(losses[-10:]) if losses else None}))
PY
  rm -rf "$run"  # its end-of-run checkpoint (1.5 GB) is of no use here
  summary
}

torch_run() {  # torch_run GPUS
  local n=$1 out=$outdir/torch-g$1.json
  rm -f "$out"
  timeout 420 torchrun --standalone --nproc-per-node "$n" bench/train/torch_ddp.py --T 1024 --B 16 \
    --steps "$steps" --json "$out" > "$outdir/torch-g$n.log" 2>&1
  local rc=$?
  echo "== torch_ddp_compile gpus=$n (rc $rc)"; tail -2 "$outdir/torch-g$n.log"
  python3 - "$out" "$n" "$rc" >> "$rows" <<'PY'
import json, sys
out, n, rc = sys.argv[1:]
try:
    r = json.load(open(out))
except (OSError, ValueError):
    r = {}
print(json.dumps({"impl": "torch_ddp_compile", "gpus": int(n), "compile_model": True, "zero1": False,
                  "grad_dtype": "fp32", "overlap": True, "tokens_per_s": r.get("tokens_per_s"),
                  "step_ms": r.get("step_ms"), "peak_mib": r.get("peak_mib"), "rc": int(rc),
                  "torch": r.get("torch")}))
PY
  summary
}

# The rows the bars need first (a time limit then cuts the extras): flashtrain's best guess on 1
# and N GPUs, torch on N, then the options, torch on 1, and the eager and ZeRO-1 rows.
torch=1; [ "${SKIP_TORCH:-0}" = 1 ] && torch=0
run 1 false 1 true fp32
if [ "$ngpu" -gt 1 ]; then
  run "$ngpu" true 1 true fp32  # ZeRO-1 over the copy engines on one host (session 19's fastest)
  [ $torch = 1 ] && torch_run "$ngpu"
fi
if [ "${ROWS:-all}" = bars ]; then
  cat "$outdir/scaling-table.md"
  exit 0
fi
if [ "$ngpu" -gt 1 ]; then
  run "$ngpu" true 1 true bf16 0 nccl  # ZeRO-1 over NCCL, bf16 (session 14's fastest)
  run "$ngpu" false 1 true fp32
  run "$ngpu" false 1 true bf16
fi
[ $torch = 1 ] && torch_run 1
run 1 false 1 false fp32
if [ "$ngpu" -gt 1 ]; then
  run "$ngpu" true 1 true bf16
  run "$ngpu" false 1 false fp32
  run "$ngpu" false 1 false bf16
  # GRAPH_ALLREDUCE_ROW=0 leaves the experimental row out.
  [ "${GRAPH_ALLREDUCE_ROW:-1}" = 1 ] && run "$ngpu" false 1 true fp32 1
fi
cat "$outdir/scaling-table.md"
