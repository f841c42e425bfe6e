#!/usr/bin/env python3
"""The PyTorch side of bench/train: GPT-2-small training steps written the way nanoGPT writes them.

A plain-PyTorch GPT-2 in nanoGPT's style (not Hugging Face's GPT2LMHeadModel, which trains about
0.78x as fast): biased nn.Linear layers, one c_attn projection for q, k, v,
F.scaled_dot_product_attention(is_causal=True) with attention dropout while training, embedding
and residual dropout, GELU(approximate="tanh"), biased LayerNorm, lm_head tied to wte, GPT-2
initialisation (std 0.02, the c_proj layers 0.02 / sqrt(2 L)). Fused AdamW (lr 6e-4, betas
(0.9, 0.95), weight decay 0.1 on the 2-D parameters only), bf16 autocast, global-norm clip 1.0;
torch_compile = `model = torch.compile(model)` as nanoGPT's train.py does (dynamic=False), torch_eager = no compile.

Random token batches (a few rotated on-device batches, so nothing is reused step to step),
`--warmup` steps untimed, then the median of `--steps` timed steps (synchronized per step) and
the peak of torch.cuda.max_memory_allocated(). One process runs every (impl, shape, dropout) row;
a row that fails prints its error and the rest go on. Each row, printed as it finishes and
written as a JSON list to --json:
  {"impl", "T", "B", "dropout", "deterministic": false, "tokens_per_s", "step_ms", "peak_mib",
   "loss", "compile_s"}   (a failed row: tokens_per_s null and "error")

    python3 bench/train/torch_nanogpt.py --shapes 1024x16 4096x4 --dropout 0 0.1 --steps 20 \
        --impls torch_compile torch_eager --json out.json
"""
import argparse
import gc
import json
import math
import statistics
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, N_LAYER, N_EMBD, N_HEAD = 50257, 12, 768, 12


class SelfAttention(nn.Module):
    def __init__(self, C, H, p):
        super().__init__()
        self.H, self.p = H, p
        self.c_attn = nn.Linear(C, 3 * C)   # q, k, v in one product
        self.c_proj = nn.Linear(C, C)
        self.resid_drop = nn.Dropout(p)

    def forward(self, x):                   # x (B, T, C)
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        # (B, T, C) -> (B, H, T, D)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.p if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.c_proj(y))


class Mlp(nn.Module):
    def __init__(self, C, p):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * C, C)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.drop(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, C, H, p):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, bias=True)
        self.attn = SelfAttention(C, H, p)
        self.ln_2 = nn.LayerNorm(C, bias=True)
        self.mlp = Mlp(C, p)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, T, p, V=VOCAB, L=N_LAYER, C=N_EMBD, H=N_HEAD):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, C),
            wpe=nn.Embedding(T, C),
            drop=nn.Dropout(p),
            h=nn.ModuleList(Block(C, H, p) for _ in range(L)),
            ln_f=nn.LayerNorm(C, bias=True),
        ))
        self.lm_head = nn.Linear(C, V, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied
        self.apply(self._init)
        for name, prm in self.named_parameters():
            if name.endswith("c_proj.weight"):  # residual projections, GPT-2's 1/sqrt(2L) scaling
                nn.init.normal_(prm, mean=0.0, std=0.02 / math.sqrt(2 * L))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):        # idx, targets (B, T) int64
        T = idx.size(1)
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        tr = self.transformer
        x = tr.drop(tr.wte(idx) + tr.wpe(pos))
        for block in tr.h:
            x = block(x)
        logits = self.lm_head(tr.ln_f(x))   # (B, T, V)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def make_optimizer(model):
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)


def train_step(model, opt, x, y):
    """One optimizer step as nanoGPT takes it: bf16 autocast, backward, clip 1.0, AdamW."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def run(impl, T, B, p, steps, warmup, n_batches=4):
    torch.manual_seed(0)
    model = Gpt(T, p).cuda()
    model.train()
    opt = make_optimizer(model)
    if impl == "torch_compile":
        # dynamic=False: nanoGPT compiles one shape per process; this process runs several, and
        # without it the second T would get a dynamic-shape graph (automatic dynamic shapes).
        model = torch.compile(model, dynamic=False)
    batches = [(torch.randint(0, VOCAB, (B, T), device="cuda"), torch.randint(0, VOCAB, (B, T), device="cuda"))
               for _ in range(n_batches)]

    def step(i):
        return train_step(model, opt, *batches[i % n_batches])

    t0 = time.perf_counter()
    step(0)  # compiles (torch_compile) and allocates optimizer state
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    for i in range(1, warmup):
        step(i)
    torch.cuda.synchronize()
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        loss = step(i)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    ms = 1000 * statistics.median(times)
    return {"impl": impl, "T": T, "B": B, "dropout": p, "deterministic": False,
            "tokens_per_s": B * T / (ms / 1000), "step_ms": ms,
            "peak_mib": torch.cuda.max_memory_allocated() / 2**20,
            "loss": float(loss.item()), "compile_s": compile_s}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="+", default=["1024x16", "4096x4"], help="TxB")
    ap.add_argument("--dropout", nargs="+", type=float, default=[0.0, 0.1])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--impls", nargs="+", default=["torch_compile", "torch_eager"],
                    choices=["torch_compile", "torch_eager"])
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True   # as nanoGPT; bf16 autocast covers the products anyway
    torch.backends.cudnn.allow_tf32 = True
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    rows = []
    for impl in a.impls:
        for shape in a.shapes:
            T, B = (int(v) for v in shape.lower().split("x"))
            for p in a.dropout:
                try:
                    row = run(impl, T, B, p, a.steps, a.warmup)
                except Exception as e:  # one failing row must not stop the others
                    traceback.print_exc()
                    row = {"impl": impl, "T": T, "B": B, "dropout": p, "deterministic": False,
                           "tokens_per_s": None, "step_ms": None, "peak_mib": None,
                           "error": f"{type(e).__name__}: {e}"[:500]}
                finally:
                    torch._dynamo.reset()  # forget the previous model's graphs and guards
                    gc.collect()
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()
                print(json.dumps(row), flush=True)
                rows.append(row)
                if a.json:  # rewritten after every row, so a killed run keeps what it finished
                    with open(a.json, "w") as f:
                        json.dump(rows, f, indent=1)
    return 0 if all(r["tokens_per_s"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
