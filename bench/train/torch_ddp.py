#!/usr/bin/env python3
"""PyTorch DistributedDataParallel + torch.compile, the reference of bench/train/scaling.sh.

The nanoGPT-style GPT-2-small of bench/train/torch_nanogpt.py (same model, initialisation, fused
AdamW, bf16 autocast, global-norm clip 1.0), wrapped the way nanoGPT's train.py does it:
`model = torch.compile(model)` then `DDP(model, device_ids=[local_rank])` (DDP's default 25 MiB
buckets, fp32 gradients, all-reduce overlapped with backward). One micro-batch per step, random
tokens (a few rotated on-device batches; throughput does not depend on the text). Run by torchrun
(or directly, as one process):

    torchrun --standalone --nproc-per-node 2 bench/train/torch_ddp.py --T 1024 --B 16 --steps 150 \
        --json out.json

`--warmup` steps (the first compiles) are untimed; then `--steps` steps are timed as one stretch
(synchronised at both ends, no per-step sync, as a training loop runs), so tokens/s is
world_size * B * T * steps / seconds. Rank 0 writes one JSON row:
  {"impl": "torch_ddp_compile" | "torch_ddp_eager", "gpus", "T", "B", "tokens_per_s", "step_ms",
   "peak_mib" (rank 0's torch.cuda.max_memory_allocated), "loss", "compile_s", "torch"}
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_nanogpt import VOCAB, Gpt, make_optimizer, train_step  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--B", type=int, default=16, help="sequences per GPU")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    if world > 1:
        dist.init_process_group("nccl")
    torch.backends.cuda.matmul.allow_tf32 = True  # as nanoGPT
    torch.backends.cudnn.allow_tf32 = True

    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = Gpt(a.T, a.dropout).cuda()
    model.train()
    opt = make_optimizer(model)
    if not a.no_compile:
        model = torch.compile(model, dynamic=False)
    if world > 1:
        model = DDP(model, device_ids=[local])
    g = torch.Generator(device="cuda")
    g.manual_seed(1000 + rank)  # each rank its own batches
    batches = [(torch.randint(0, VOCAB, (a.B, a.T), device="cuda", generator=g),
                torch.randint(0, VOCAB, (a.B, a.T), device="cuda", generator=g)) for _ in range(4)]

    def step(i):
        return train_step(model, opt, *batches[i % len(batches)])

    t0 = time.perf_counter()
    step(0)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    for i in range(1, a.warmup):
        step(i)
    torch.cuda.synchronize()
    if world > 1:
        dist.barrier()
    t0 = time.perf_counter()
    for i in range(a.steps):
        loss = step(i)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    loss = loss.detach()
    if world > 1:
        dist.all_reduce(loss)
        loss /= world
    tps = world * a.B * a.T * a.steps / seconds
    row = {"impl": "torch_ddp_eager" if a.no_compile else "torch_ddp_compile", "gpus": world, "T": a.T, "B": a.B,
           "tokens_per_s": tps, "step_ms": 1000 * seconds / a.steps,
           "peak_mib": torch.cuda.max_memory_allocated() / 2**20, "loss": float(loss.item()),
           "compile_s": compile_s, "torch": torch.__version__}
    if rank == 0:
        print(json.dumps(row), flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(row, f)
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
