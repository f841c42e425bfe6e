#!/usr/bin/env python3
"""Which part of a bf16 precision scheme moves a checkpoint's gradients: PyTorch emulations on the
batch that `flashtrain gradients` wrote, each against the fp32 reference (session 38).

    python3 tests/train/hf_bf16_emulation.py CKPT grads.safetensors

Each case runs Hugging Face's GPT2LMHeadModel on the file's tokens with some of flashtrain's bf16
choices applied to an fp32 or autocast model: parameters rounded to bf16 (all, or all but the
LayerNorms'), the residual stream rounded to bf16 at the embedding and after every block (its
values in the forward, its gradient in the backward, or both), or the whole model cast to bf16.
Prints the relative error ||g - ref|| / ||ref|| of a few gradients per case, then where wpe's
error sits (its worst rows: positions), so that a failing cross-check can be traced to a scheme
and a position. Needs torch, transformers and safetensors (the GPU machine).
"""
import sys

import torch
from safetensors.torch import load_file
from transformers import GPT2LMHeadModel


def bf(t):
    return t.bfloat16().float()


class RoundBf16(torch.autograd.Function):
    """Identity that rounds to bf16 its forward value (fwd) and / or its gradient (bwd)."""

    @staticmethod
    def forward(ctx, x, fwd, bwd):
        ctx.bwd = bwd
        return bf(x) if fwd else x.clone()

    @staticmethod
    def backward(ctx, g):
        return (bf(g) if ctx.bwd else g), None, None


def main():
    ckpt, path = sys.argv[1], sys.argv[2]
    tokens = load_file(path, device="cuda")["tokens"].long()
    T = tokens.shape[1] - 1
    model = GPT2LMHeadModel.from_pretrained(ckpt).cuda().float().eval()
    state = {k: v.clone() for k, v in model.state_dict().items()}

    def grads(round_params=None, autocast=False, resid=None, whole_bf16=False):
        m = model
        m.load_state_dict(state)
        if round_params is not None:
            with torch.no_grad():
                for n, p in m.named_parameters():
                    if round_params(n):
                        p.copy_(bf(p))
        hooks = []
        if resid is not None:  # (fwd, bwd)
            r = lambda t: RoundBf16.apply(t, *resid)
            hooks.append(m.transformer.drop.register_forward_hook(lambda mod, i, o: r(o)))
            for b in m.transformer.h:
                hooks.append(b.register_forward_hook(
                    lambda mod, i, o: (r(o[0]),) + tuple(o[1:]) if isinstance(o, tuple) else r(o)))
        if whole_bf16:
            m = GPT2LMHeadModel.from_pretrained(ckpt).cuda().bfloat16().eval()
        m.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = m(tokens[:, :T]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
        loss.backward()
        for h in hooks:
            h.remove()
        return {n: p.grad.detach().float().clone() for n, p in m.named_parameters()}

    def rel(a, b):
        return ((a.double() - b.double()).norm() / b.double().norm()).item()

    every = lambda n: True
    not_ln = lambda n: ".ln_" not in n
    cases = [
        ("autocast (the cross-check's second bar)", dict(autocast=True)),
        ("fp32, params rounded", dict(round_params=every)),
        ("fp32, residual values + gradients rounded", dict(resid=(True, True))),
        ("autocast, residual values + gradients rounded", dict(autocast=True, resid=(True, True))),
        ("autocast, params rounded", dict(autocast=True, round_params=every)),
        ("autocast, params + residual values rounded", dict(autocast=True, round_params=every, resid=(True, False))),
        ("autocast, params + residual gradients rounded", dict(autocast=True, round_params=every, resid=(False, True))),
        ("autocast, params + residual both rounded", dict(autocast=True, round_params=every, resid=(True, True))),
        ("  the same, LayerNorm params kept fp32", dict(autocast=True, round_params=not_ln, resid=(True, True))),
        ("whole model bf16 (the cross-check's bar)", dict(whole_bf16=True)),
    ]
    names = ["transformer.wpe.weight", "transformer.wte.weight", "transformer.h.0.attn.c_attn.weight",
             "transformer.h.1.attn.c_attn.weight", "transformer.h.5.attn.c_attn.weight"]
    short = ["wpe", "wte", "h0.c_attn", "h1.c_attn", "h5.c_attn"]
    ref = grads()
    print(f"{'case':48s} " + " ".join(f"{s:>10s}" for s in short))
    for label, kw in cases:
        g = grads(**kw)
        print(f"{label:48s} " + " ".join(f"{rel(g[n], ref[n]):10.3e}" for n in names))
    g = grads(whole_bf16=True)
    w, wr = g[names[0]].double(), ref[names[0]].double()
    err = ((w - wr) ** 2).sum(-1)
    norm = (wr ** 2).sum(-1)
    print("wpe rows (positions) with the most of bf16's squared error:")
    for i in torch.argsort(err, descending=True)[:4].tolist():
        print(f"  position {i:4d}: {err[i] / err.sum():.3f} of the error, {norm[i] / norm.sum():.3f} of the gradient's "
              f"squared norm, tokens there {tokens[:, i].tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
