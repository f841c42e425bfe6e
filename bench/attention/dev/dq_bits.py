"""Do two builds compute the same deterministic backward, bit for bit? For kernel changes meant to
keep every bit (e.g. folding the fixed-point dQ's 2^40 into K): dQ, dK and dV of the deterministic
backward (variant 4, as training runs it) from two libft_attention.so builds on the same inputs,
D = 64 and 128, causal and not, p = 0 and 0.1, T from partial tiles to the wide tile (8192).
Prints the differing elements per case (and how many of them are zeros of the other sign, which count
as equal) and IDENTICAL or how many cases differ (exit status 1).
  FLASHTRAIN_DETERMINISTIC_DQ=fixed python3 bench/attention/dev/dq_bits.py NEW_LIB BASE_LIB
(the variable forces the fixed-point form below T = 4096 too; "ordered" checks the other form, with
FLASHTRAIN_FLASH_BWD_WS_MIN_T=0 so that the warp-specialised backward's form runs at T = 1000 too)."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402

import bench_attention as ba  # noqa: E402

CASES = ((2, 1000, True), (2, 1024, True), (1, 4096, True), (1, 4096, False), (1, 8192, True))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    libs = [ctypes.CDLL(os.path.abspath(p)) for p in sys.argv[1:3]]
    differing_cases = 0
    for d in (64, 128):
        ba.D, ba.H = d, ba.HIDDEN // d
        for B, T, causal in CASES:
            qkv, dout = ba.make_inputs(B, T, seed=3)
            for p in (0.0, 0.1):
                grads = []
                for lib in libs:
                    impl = ba.Flashtrain(lib, 0, 4)
                    impl.setup(qkv, dout, causal, p)
                    grads.append(impl.backward(impl.forward()).view(torch.int16).clone())
                torch.cuda.synchronize()
                differ = grads[0] != grads[1]
                n = differ.sum().item()
                # bf16 / f16 zeros are 0x0000 and 0x8000: a form may differ in the sign of a zero only
                zeros = (differ & ((grads[0] & 0x7FFF) == 0) & ((grads[1] & 0x7FFF) == 0)).sum().item()
                differing_cases += n != zeros
                print(f"D={d} B={B} T={T} causal={int(causal)} p={p}: {n} of {grads[0].numel()} "
                      f"dqkv elements differ ({zeros} of them only in the sign of a zero)", flush=True)
    print("dq_bits:", "IDENTICAL" if differing_cases == 0 else f"{differing_cases} cases differ")
    return 1 if differing_cases else 0


if __name__ == "__main__":
    sys.exit(main())
