#!/usr/bin/env python3
"""The PyTorch side of bench/train: GPT-2-small training steps in PyTorch on the same card.

Hugging Face's GPT2LMHeadModel (SDPA attention), bf16 autocast, fused AdamW, dropout 0.1, random
token batches; eager and torch.compile. Prints one JSON row per configuration:
{impl, T, B, tokens_per_s, step_ms, peak_mib}. PyTorch is the reference here, never a dependency.

    python3 bench/train/torch_gpt2.py --shapes 1024x16 512x32 --steps 20 --json out.json
"""
import argparse
import json
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def run(T, B, compiled, steps, warmup):
    torch.manual_seed(0)
    cfg = GPT2Config(n_positions=T, n_embd=768, n_layer=12, n_head=12, vocab_size=50257,
                     resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)
    model = GPT2LMHeadModel(cfg).cuda()
    model.config._attn_implementation = "sdpa"
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.0, fused=True)

    def step(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    fn = torch.compile(step) if compiled else step
    x = torch.randint(0, 50257, (B, T), device="cuda")
    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    times.sort()
    ms = 1000 * times[len(times) // 2]
    return {"impl": "torch_compile" if compiled else "torch_eager", "T": T, "B": B,
            "tokens_per_s": B * T / (ms / 1000), "step_ms": ms,
            "peak_mib": torch.cuda.max_memory_allocated() / 2**20}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["1024x16", "512x32"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    for s in a.shapes:
        T, B = map(int, s.split("x"))
        for compiled in ([False] if a.no_compile else [False, True]):
            r = run(T, B, compiled, a.steps, 5 if compiled else 3)
            print(json.dumps(r), flush=True)
            rows.append(r)
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
