"""One flash forward + backward at T=4096 (B=8, H=12, D=64, causal, bf16) for p = 0 and 0.1, for
Nsight Compute to profile (bench/attention/dev/gpu_dev.sh profile). Usage:
  [FT_VARIANT=N] python3 bench/attention/dev/profile_bwd.py LIB [T] [torch]
FT_VARIANT picks attention_capi.cu's variant (default 0, the shipped kernels; 42 the warp-specialised
backward).
With "torch", PyTorch's flash backend (FlashAttention-2) runs the same calls afterwards, so one
report holds both (its kernels are flash_fwd_kernel / flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ctypes  # noqa: E402

import torch  # noqa: E402

import bench_attention as ba  # noqa: E402

lib = ctypes.CDLL(os.path.abspath(sys.argv[1]))
T = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
qkv, dout = ba.make_inputs(ba.TOKENS // T, T)
VARIANT = int(os.environ.get("FT_VARIANT", "0"))  # attention_capi.cu's variants (42: the ws backward)
for p in (0.0, 0.1):
    impl = ba.Flashtrain(lib, 0, VARIANT)
    impl.setup(qkv, dout, True, p)
    impl.backward(impl.forward())
if len(sys.argv) > 3 and sys.argv[3] == "torch":
    for p in (0.0, 0.1):
        impl = ba.IMPLS["torch_flash"](lib)
        impl.setup(qkv, dout, True, p)
        impl.backward(impl.forward())
torch.cuda.synchronize()
print("profiled T", T)
