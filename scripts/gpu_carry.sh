#!/usr/bin/env bash
# Assembles .gpu/ (git-ignored): what the GPU machine (no network, no -dev packages beyond the
# CUDA image) needs and cannot fetch. The device tool carries it: name .gpu in its `carry`.
#   bpe/        GPT-2 vocabulary (scripts/fetch_gpt2_bpe.sh)
#   pcre2/      PCRE2 headers, static library and a relocated pkg-config file (Debian's libpcre2-dev)
#   nlohmann/   nlohmann/json headers and CMake package (Debian's nlohmann-json3-dev), when installed
#   kjv/        the KJV corpus as token shards (needs a built flashtrain: FLASHTRAIN=build/flashtrain)
# Idempotent; `scripts/gpu_carry.sh` from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
dst=.gpu
mkdir -p "$dst"

scripts/fetch_gpt2_bpe.sh "$dst/bpe" >/dev/null

if [ ! -f "$dst/pcre2/lib/libpcre2-8.a" ]; then
  multi=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  mkdir -p "$dst/pcre2/include" "$dst/pcre2/lib/pkgconfig"
  cp /usr/include/pcre2.h "$dst/pcre2/include/"
  cp "/usr/lib/$multi/libpcre2-8.a" "$dst/pcre2/lib/"
  # pkg-config's ${pcfiledir} makes the file valid wherever the folder lands.
  cat >"$dst/pcre2/lib/pkgconfig/libpcre2-8.pc" <<'PC'
prefix=${pcfiledir}/../..
libdir=${prefix}/lib
includedir=${prefix}/include
Name: libpcre2-8
Description: PCRE2 8-bit (static, carried)
Version: 10.42
Libs: -L${libdir} -lpcre2-8
Cflags: -I${includedir}
PC
fi

if [ -f /usr/include/nlohmann/json.hpp ] && [ ! -f "$dst/nlohmann/include/nlohmann/json.hpp" ]; then
  mkdir -p "$dst/nlohmann/include" "$dst/nlohmann/share/cmake"
  cp -r /usr/include/nlohmann "$dst/nlohmann/include/"
  [ -d /usr/share/cmake/nlohmann_json ] && cp -r /usr/share/cmake/nlohmann_json "$dst/nlohmann/share/cmake/"
fi

if [ ! -f "$dst/kjv/train_000000.bin" ]; then
  FLASHTRAIN=${FLASHTRAIN:-build/flashtrain}
  if [ -x "$FLASHTRAIN" ]; then
    FLASHTRAIN_BPE_DIR=$PWD/$dst/bpe "$FLASHTRAIN" prepare --corpus kjv --out "$dst/kjv"
  else
    echo "gpu_carry.sh: $FLASHTRAIN not built: $dst/kjv (token shards) left out" >&2
  fi
fi
du -sh "$dst"/* 2>/dev/null
