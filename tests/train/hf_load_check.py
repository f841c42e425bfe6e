#!/usr/bin/env python3
"""Loads a flashtrain checkpoint directory with Hugging Face transformers, as a user would.

    python3 tests/train/hf_load_check.py runs/tiny/ckpt-200

Checks that GPT2LMHeadModel.from_pretrained(dir) finds every weight (no missing or unexpected
keys), that lm_head is tied to wte, and that model.safetensors holds exactly the tensors of the
checkpoint, then prints the logits of a short input. Needs torch, transformers and safetensors,
so it runs on the GPU machine, not in ctest; the C++ side is covered by checkpoint_test.cpp.
"""
import sys

import torch
from safetensors import safe_open
from transformers import GPT2LMHeadModel


def main(path: str) -> int:
    model, info = GPT2LMHeadModel.from_pretrained(path, output_loading_info=True)
    # Newer transformers report these as sets, older ones as lists.
    missing = [k for k in info["missing_keys"] if k != "lm_head.weight"]
    problems = missing + [str(k) for key in ("unexpected_keys", "mismatched_keys", "error_msgs") for k in info[key]]
    if problems:
        print(f"{path}: from_pretrained reported {problems}", file=sys.stderr)
        return 1
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        print(f"{path}: lm_head is not tied to wte", file=sys.stderr)
        return 1
    with safe_open(f"{path}/model.safetensors", framework="pt") as f:
        state = model.state_dict()
        for name in f.keys():
            if not torch.equal(f.get_tensor(name), state[name].to(f.get_tensor(name).dtype)):
                print(f"{path}: {name} differs after loading", file=sys.stderr)
                return 1
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor([[50256, 464, 318]])).logits
    print(f"{path}: loaded {sum(p.numel() for p in model.parameters())} parameters; logits {tuple(logits.shape)}, "
          f"mean {logits.float().mean().item():.6f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
