#!/usr/bin/env python3
"""Times tiktoken's GPT-2 encoding, single-threaded, on a text file, with the same vocabulary files
flashtrain uses -- the baseline for bench/results/tokenizer-*.md.

    python3 bench/tokenizer/tiktoken_bench.py --text kjv.txt \
        --encoder-json ~/.cache/flashtrain/gpt2/encoder.json --vocab-bpe ~/.cache/flashtrain/gpt2/vocab.bpe \
        --json tiktoken.json

Make kjv.txt with `ft_tokenizer_bench --write-text kjv.txt` on a machine that has bible-kjv, so both
benchmarks read the same bytes. The id count and FNV-1a hash it prints must equal those printed by
ft_tokenizer_bench (same ids). Needs only `tiktoken` (no network): the ranks are built from the two
local files, through tiktoken.load.data_gym_to_mergeable_bpe_ranks when it can read local paths
(some versions need `blobfile` for that) and otherwise by the same construction done here.
"""
import argparse
import json
import platform
import time

import tiktoken

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def ranks_from_files(encoder_json, vocab_bpe):
    """GPT-2's ranks are its ids: single bytes first, then one per merge, in vocab.bpe order."""
    byte_decoder = {c: b for b, c in bytes_to_unicode().items()}
    with open(encoder_json, encoding="utf-8") as f:
        encoder = json.load(f)
    ranks = {bytes(byte_decoder[c] for c in tok): i for tok, i in encoder.items() if tok != "<|endoftext|>"}
    with open(vocab_bpe, encoding="utf-8") as f:
        merges = [tuple(line.split()) for line in f.read().split("\n")[1:-1]]
    for k, (a, b) in enumerate(merges):  # check the ids really are the merge ranks
        assert ranks[bytes(byte_decoder[c] for c in a + b)] == 256 + k, (a, b)
    return ranks


def load_ranks(encoder_json, vocab_bpe):
    try:
        from tiktoken.load import data_gym_to_mergeable_bpe_ranks

        return data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=vocab_bpe, encoder_json_file=encoder_json), "tiktoken.load"
    except ImportError:  # local paths need blobfile in some tiktoken versions
        return ranks_from_files(encoder_json, vocab_bpe), "local construction"


def fnv1a_ids(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for k in range(4):
            h ^= (i >> (8 * k)) & 0xFF
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", required=True)
    ap.add_argument("--encoder-json", required=True)
    ap.add_argument("--vocab-bpe", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write the results here as JSON")
    args = ap.parse_args()

    with open(args.text, "rb") as f:
        data = f.read()
    text = data.decode("utf-8")
    ranks, source = load_ranks(args.encoder_json, args.vocab_bpe)
    enc = tiktoken.Encoding(
        name="gpt2-local",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 50256},
        explicit_n_vocab=50257,
    )
    enc.encode_ordinary("warm up")
    best = float("inf")
    ids = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        ids = enc.encode_ordinary(text)  # one call, one thread
        best = min(best, time.perf_counter() - t0)
    mb = len(data) / 1e6
    result = {
        "tiktoken_version": getattr(tiktoken, "__version__", "unknown"),
        "ranks_from": source,
        "python": platform.python_version(),
        "machine": platform.node(),
        "bytes": len(data),
        "tokens": len(ids),
        "ids_fnv1a": f"{fnv1a_ids(ids):016x}",
        "seconds_best": best,
        "mb_per_s_1thread": mb / best,
    }
    print(f"tiktoken {result['tiktoken_version']}: {mb:.2f} MB, {len(ids)} tokens, ids fnv1a {result['ids_fnv1a']}, "
          f"1 thread {mb / best:.1f} MB/s ({best:.3f} s, best of {args.repeats})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
