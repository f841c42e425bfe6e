#!/usr/bin/env python3
"""Cross-checks flashtrain's logits, loss and every parameter gradient against Hugging Face's
GPT2LMHeadModel loaded from the same flashtrain checkpoint (issue 5).

    build/flashtrain gradients --checkpoint CKPT --data SHARD --out grads.safetensors --batch-size 4
    python3 tests/train/hf_grad_cross_check.py CKPT grads.safetensors

The reference is PyTorch in fp32 on the same batch (the `tokens` tensor of the file), in eval mode
(no dropout), loss = mean cross-entropy over the B*T targets, as ours. flashtrain computes in the
checkpoint's precision (bf16 on a GPU), so its error is judged against what bf16 costs PyTorch
itself: the same model under torch.autocast(bfloat16). For the logits, the loss and each of the
148 gradients, the relative error ||x - ref|| / ||ref|| of ours must be at most
    factor * (PyTorch bf16's relative error) + floor        (default factor 2, floor 1e-3)
-- the same "within 2x of the other implementation in the same precision" bar the attention
tests use. Prints one row per tensor (worst first) and exits 1 on any failure. Needs torch,
transformers and safetensors: it runs on the GPU machine, not in ctest.
"""
import argparse
import sys

import torch
from safetensors.torch import load_file
from transformers import GPT2LMHeadModel


def rel(x, ref):
    return (x.double() - ref.double()).norm().item() / max(ref.double().norm().item(), 1e-30)


def hf_pass(model, tokens, autocast):
    model.zero_grad(set_to_none=True)
    T = tokens.shape[1] - 1
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        logits = model(tokens[:, :T]).logits
    loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
    loss.backward()
    grads = {n: p.grad.detach().float().clone() for n, p in model.named_parameters()}
    return logits.detach().float(), loss.detach().float().reshape(1), grads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("ours", help="the file `flashtrain gradients` wrote")
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--floor", type=float, default=1e-3)
    a = ap.parse_args()
    ours = load_file(a.ours, device="cuda")
    tokens = ours["tokens"].long()
    model = GPT2LMHeadModel.from_pretrained(a.checkpoint).cuda().float().eval()
    ref_logits, ref_loss, ref_grads = hf_pass(model, tokens, autocast=False)
    bf_logits, bf_loss, bf_grads = hf_pass(model, tokens, autocast=True)

    rows = [("logits", rel(ours["logits"], ref_logits), rel(bf_logits, ref_logits)),
            ("loss", rel(ours["loss"], ref_loss), rel(bf_loss, ref_loss))]
    missing = []
    for name, ref in ref_grads.items():
        if name == "lm_head.weight":
            continue  # tied to transformer.wte.weight: HF accumulates both uses there
        key = "grad." + name
        if key not in ours:
            missing.append(name)
            continue
        rows.append((key, rel(ours[key], ref), rel(bf_grads[name], ref)))
    if missing:
        print(f"hf_grad_cross_check: FAIL: the file lacks gradients of {missing}")
        return 1
    failed = 0
    print(f"{'tensor':48s} {'ours vs fp32':>13s} {'torch bf16':>11s} {'ratio':>7s}")
    for name, e_ours, e_bf in sorted(rows, key=lambda r: -(r[1] / max(r[2], 1e-30))):
        ok = e_ours <= a.factor * e_bf + a.floor
        failed += not ok
        print(f"{name:48s} {e_ours:13.3e} {e_bf:11.3e} {e_ours / max(e_bf, 1e-30):7.2f}{'' if ok else '  FAIL'}")
    print(f"hf_grad_cross_check: loss ours {ours['loss'].item():.5f}, PyTorch fp32 {ref_loss.item():.5f}, "
          f"bf16 autocast {bf_loss.item():.5f}; {len(rows)} tensors compared, {failed} outside "
          f"{a.factor} x PyTorch-bf16 error + {a.floor}: {'PASS' if failed == 0 else 'FAIL'}")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
