#!/usr/bin/env python3
"""Cross-checks a flashtrain checkpoint against PyTorch: the loss Hugging Face's GPT2LMHeadModel,
loaded from our checkpoint, computes over a token shard must equal the loss `flashtrain eval`
printed for the same checkpoint, windows and batches, to bf16 tolerance.

    build/flashtrain eval --checkpoint CKPT --data SHARD --batch-size B --seq-len T
    python3 tests/train/hf_cross_check.py CKPT SHARD --seq-len T --batch-size B --ours-loss LOSS

Windows follow data/loader.h in file order: window k holds tokens [k*T, k*T + T], the inputs are
its first T tokens and the targets its last T; whole batches of B windows only. PyTorch computes
in fp32 here (the reference); ours in the checkpoint's precision (bf16 on a GPU), hence the 1%
relative tolerance. Needs torch and transformers, so it runs on the GPU machine, not in ctest.
"""
import argparse
import sys

import numpy as np
import torch
from transformers import GPT2LMHeadModel


def read_shard(path):
    header = np.fromfile(path, dtype=np.int32, count=256)
    if header[0] != 20240520 or header[1] != 1:
        raise SystemExit(f"{path}: not an llm.c token shard (magic {header[0]}, version {header[1]})")
    tokens = np.fromfile(path, dtype=np.uint16, offset=256 * 4)
    if len(tokens) != header[2]:
        raise SystemExit(f"{path}: header says {header[2]} tokens, file holds {len(tokens)}")
    return tokens.astype(np.int64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("shard")
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--ours-loss", type=float, required=True)
    ap.add_argument("--rtol", type=float, default=1e-2)
    a = ap.parse_args()
    T, B = a.seq_len, a.batch_size
    tokens = read_shard(a.shard)
    windows = (len(tokens) - 1) // T
    batches = windows // B
    model = GPT2LMHeadModel.from_pretrained(a.checkpoint).cuda().float().eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for b in range(batches):
            rows = [tokens[(b * B + i) * T:(b * B + i) * T + T + 1] for i in range(B)]
            w = torch.tensor(np.stack(rows), device="cuda")
            logits = model(w[:, :T]).logits.float()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1))
            total += loss.item()
            count += 1
    theirs = total / count
    rel = abs(a.ours_loss - theirs) / theirs
    print(f"hf_cross_check: PyTorch loss {theirs:.5f} over {batches} batches of {B} x {T}; flashtrain {a.ours_loss:.5f}; "
          f"relative difference {rel:.2e} (tolerance {a.rtol:.0e})")
    return 0 if rel <= a.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
