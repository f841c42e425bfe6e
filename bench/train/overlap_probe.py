"""Why does overlapping the gradient sum with the backward pass cost about what it hides? (issue 20)

Times two stand-ins for the backward's kernels on one GPU -- a GPT-2-small-shaped matmul (bf16,
16384 x 768 @ 768 x 3072, compute-bound) and an elementwise pass (GELU over 16384 x 3072,
memory-bound) -- alone, and while something else runs on a second stream of the same GPU:

  sleep      torch.cuda._sleep on a side stream: one resident one-thread CTA, i.e. an SM slot
             taken and nothing else (the wave-quantisation question);
  allreduce  NCCL all-reduces of 25 MiB bf16 buckets back to back (needs torchrun, 2+ ranks): SMs,
             memory traffic and NVLink, as the overlapped sum does;
  peercopy   copies of 25 MiB to the other GPU and back on the side stream (single process, 2+
             GPUs visible): copy engines, no SMs -- what copy-engine collectives would cost.

A row per (mode, workload): ms per iteration and the slowdown against "alone". If "allreduce" slows
the matmul and "sleep" and "peercopy" do not, the cost is NCCL's SM-driven kernels, and collectives
on the copy engines (cudaMemcpyPeerAsync) could overlap for free.

  torchrun --nproc_per_node 2 bench/train/overlap_probe.py       # alone, sleep, allreduce
  python3 bench/train/overlap_probe.py                           # alone, sleep, peercopy
"""
import json
import os
import sys

import torch

ITERS = 50


def workloads(dev):
    x = torch.randn(16384, 768, device=dev, dtype=torch.bfloat16)
    w = torch.randn(768, 3072, device=dev, dtype=torch.bfloat16)
    h = torch.randn(16384, 3072, device=dev, dtype=torch.bfloat16)
    return {"matmul": lambda: x @ w, "elementwise": lambda: torch.nn.functional.gelu(h)}


def time_ms(fn, side=None):
    """ms per call of fn over ITERS calls on the current stream, with side() keeping the side stream
    busy for (at least) the whole stretch."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if side:
        side()  # queued first, so it is running when the timed stretch starts
    start.record()
    for _ in range(ITERS):
        fn()
    end.record()
    end.synchronize()
    torch.cuda.synchronize()  # the side stream's remaining work too
    return start.elapsed_time(end) / ITERS


def side_sleep(stream):
    def go():
        with torch.cuda.stream(stream):
            torch.cuda._sleep(2_000_000_000)  # ~1 s at 1.8 GHz: longer than any timed stretch
    return go


def side_loop(stream, op, repeats):
    def go():
        with torch.cuda.stream(stream):
            for _ in range(repeats):
                op()
    return go


def main():
    distributed = "WORLD_SIZE" in os.environ
    rank = int(os.environ.get("RANK", 0))
    if distributed:
        import torch.distributed as dist
        dist.init_process_group("nccl")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dev = torch.device("cuda", torch.cuda.current_device())
    side = torch.cuda.Stream(dev)
    bucket = torch.ones(25 * 1024 * 1024 // 2, device=dev, dtype=torch.bfloat16)
    modes = {"alone": None, "sleep": side_sleep(side)}
    if distributed:
        modes["allreduce"] = side_loop(side, lambda: dist.all_reduce(bucket), 400)
    elif torch.cuda.device_count() > 1:
        peer = torch.empty_like(bucket, device=torch.device("cuda", (dev.index + 1) % torch.cuda.device_count()))

        def there_and_back():
            peer.copy_(bucket, non_blocking=True)
            bucket.copy_(peer, non_blocking=True)
        modes["peercopy"] = side_loop(side, there_and_back, 200)
    rows = []
    for wname, fn in workloads(dev).items():
        base = None
        for mname, mode in modes.items():
            if distributed:
                dist.barrier()
            ms = time_ms(fn, mode)
            base = base or ms
            rows.append({"mode": mname, "workload": wname, "ms": round(ms, 4), "slowdown": round(ms / base - 1, 4)})
            if distributed:
                torch.cuda.synchronize()
                dist.barrier()
    if rank == 0:
        name = torch.cuda.get_device_name(dev)
        print(f"# overlap probe on {name} ({'torchrun' if distributed else 'one process'})")
        print("| mode | workload | ms per call | slowdown |\n|---|---|---|---|")
        for r in rows:
            print(f"| {r['mode']} | {r['workload']} | {r['ms']:.4f} | {100 * r['slowdown']:+.1f}% |")
        print(json.dumps({"card": name, "distributed": distributed, "rows": rows}))
    if distributed:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
