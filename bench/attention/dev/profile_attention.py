"""One flash forward (or forward + backward) per variant, and cuDNN's through PyTorch SDPA, at one
shape, causal, bf16, B T = 32768, H = 768 / D (bench_attention's; --full, --tokens and --hidden
change them: bench_fp8's are --tokens 16384 --hidden 2048), for Nsight Compute to profile side by
side. Usage:
  python3 bench/attention/dev/profile_attention.py LIB D T VARIANT[,VARIANT...] [--backward] [--p P]
      [--cudnn] [--full] [--tokens N] [--hidden N] [--repeat N]
bench/attention/dev/ncu_times.sh runs it under ncu and prints each kernel's median time.
VARIANT: attention_capi.cu's variants (0: the dispatch's kernels with atomic dQ; 4: its
deterministic backward; 48/49: the warp-specialised forward with the ping-pong / and the overlap at
every T; 63: the deterministic backward from a stored dS). With --backward every call also runs its
backward (select the kernels with ncu's -k).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ctypes  # noqa: E402

import torch  # noqa: E402

import bench_attention as ba  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("lib")
ap.add_argument("D", type=int)
ap.add_argument("T", type=int)
ap.add_argument("variants")
ap.add_argument("--backward", action="store_true")
ap.add_argument("--p", type=float, default=0.0, help="dropout")
ap.add_argument("--cudnn", action="store_true", help="cuDNN's kernels after ours")
ap.add_argument("--full", action="store_true", help="no causal mask")
ap.add_argument("--tokens", type=int, default=ba.TOKENS, help="B T")
ap.add_argument("--hidden", type=int, default=ba.HIDDEN, help="H D")
ap.add_argument("--repeat", type=int, default=1, help="calls per implementation")
args = ap.parse_args()

lib = ctypes.CDLL(os.path.abspath(args.lib))
ba.D = args.D
ba.H = args.hidden // ba.D
qkv, dout = ba.make_inputs(args.tokens // args.T, args.T)
impls = [ba.Flashtrain(lib, 0, int(v)) for v in args.variants.split(",")]
if args.cudnn:
    impls.append(ba.IMPLS["torch_cudnn"](lib))
for impl in impls:
    impl.setup(qkv, dout, not args.full, args.p)
    for _ in range(args.repeat):
        out = impl.forward()
        if args.backward:
            impl.backward(out)
torch.cuda.synchronize()
print("profiled D", ba.D, "H", ba.H, "T", args.T, "p", args.p, "full" if args.full else "causal",
      "backward" if args.backward else "forward")
