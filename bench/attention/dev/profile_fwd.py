"""One flash forward per variant (and cuDNN's through PyTorch SDPA) at one shape, p = 0, causal, bf16,
B T = 32768, H = 768 / D, for Nsight Compute to profile side by side. Usage:
  python3 bench/attention/dev/profile_fwd.py LIB D T VARIANT[,VARIANT...] [cudnn]
VARIANT: attention_capi.cu's variants (0: the dispatch's kernel; 48: the warp-specialised forward with
the ping-pong at every T; 49: with the overlap too).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ctypes  # noqa: E402

import torch  # noqa: E402

import bench_attention as ba  # noqa: E402

lib = ctypes.CDLL(os.path.abspath(sys.argv[1]))
ba.D = int(sys.argv[2])
ba.H = ba.HIDDEN // ba.D
T = int(sys.argv[3])
qkv, dout = ba.make_inputs(ba.TOKENS // T, T)
for variant in (int(v) for v in sys.argv[4].split(",")):
    impl = ba.Flashtrain(lib, 0, variant)
    impl.setup(qkv, dout, True, 0.0)
    impl.forward()
if len(sys.argv) > 5 and sys.argv[5] == "cudnn":
    impl = ba.IMPLS["torch_cudnn"](lib)
    impl.setup(qkv, dout, True, 0.0)
    impl.forward()
torch.cuda.synchronize()
print("profiled D", ba.D, "T", T)
