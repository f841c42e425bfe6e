#!/usr/bin/env python3
"""Opcode histograms of the flash kernels' SASS (run on the GPU machine, which has cuobjdump).

  python3 bench/attention/dev/sass_stats.py OBJ [OBJ...] --match REGEX [--top N] [--dump DIR]

For every kernel whose mangled name matches REGEX: its instruction count and the N most frequent
opcodes (predicates stripped, modifiers kept), so two builds of a kernel can be compared by what
they execute per tile rather than by timing alone. --dump writes each matching kernel's SASS.
"""
import argparse
import collections
import os
import re
import subprocess


def kernels(obj):
    text = subprocess.run(["cuobjdump", "-sass", obj], capture_output=True, text=True).stdout
    name, body = None, []
    for line in text.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if name and m:
            body.append(m.group(1).strip())
    if name:
        yield name, body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("objs", nargs="+")
    ap.add_argument("--match", default="flash_")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--dump", default=None)
    args = ap.parse_args()
    for obj in args.objs:
        for name, body in kernels(obj):
            if not re.search(args.match, name):
                continue
            ops = collections.Counter()
            for ins in body:
                ins = re.sub(r"^@!?U?P[T0-9]+\s+", "", ins)
                ops[ins.split()[0]] += 1
            print(f"== {os.path.basename(obj)} {name}: {len(body)} instructions")
            print("   " + "  ".join(f"{op} {n}" for op, n in ops.most_common(args.top)))
            if args.dump:
                os.makedirs(args.dump, exist_ok=True)
                with open(os.path.join(args.dump, name[:120] + ".sass"), "w") as f:
                    f.write("\n".join(body) + "\n")


if __name__ == "__main__":
    main()
