#!/usr/bin/env bash
# Packs binaries built on this machine into .gpu/bins.tar.xz, so that a device call spends its
# minutes running instead of building (a build there takes 3-5 of a session's 30). The GPU
# machine's image has CUDA, cuBLAS and NCCL but another yaml-cpp (0.8) and no PCRE2 runtime
# promise, so the shared libraries this build links from the system travel too.
#   scripts/gpu_pack_bins.sh [BUILD_DIR] [TARGET...]
#     BUILD_DIR  a CMake build of this tree for sm_90a (default: build; CMakeLists.txt's default
#                architecture is 90a)
#     TARGET     paths inside BUILD_DIR (default: flashtrain, the test binaries, bench/bench_ops,
#                bench/attention/libft_attention.so, bench/attention/sanitize_attention)
#   BASE_LIB=path  also packs that libft_attention.so as build-base/libft_attention.so: the library
#                of the commit before, for bench/attention/dev/ws_call.sh's bits and ab stages
#   EXP_LIB=path   also packs that libft_attention.so as build-exp/libft_attention.so (an
#                experiment's, for ws_call.sh's WS_LIB)
#   BASE_BIN=path  also packs that flashtrain as build-base/flashtrain (the commit before, for
#                bench/train/dev/copy_engine_call.sh's timing stage)
#   EXTRA="path:dest ..."  also packs each file at dest (a path under the repo root there), e.g. a
#                second experiment's library: EXTRA=/tmp/exp2.so:build-exp2/libft_attention.so
# On the GPU machine (carry .gpu): `scripts/gpu_check.sh unpack test ...` puts them in build-gpu/
# and runs the test binaries directly (no ctest files travel). Session 16 ran every device call
# this way. Size: about 12-25 MiB for two or three binaries; the device tool carries 64 MiB in all.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(flashtrain bench/bench_ops bench/attention/libft_attention.so bench/attention/sanitize_attention)
  for t in "$build"/tests/ft_*_tests; do targets+=("tests/$(basename "$t")"); done
fi
arch=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
case "${arch:-90a}" in
  *90a*) ;;
  *) echo "gpu_pack_bins: $build is built for CUDA architectures '$arch', not 90a (H100/H200)" >&2; exit 1 ;;
esac
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build-gpu"
for t in "${targets[@]}"; do
  [ -f "$build/$t" ] || { echo "gpu_pack_bins: $build/$t is not built (cmake --build $build --target ...)" >&2; exit 1; }
  mkdir -p "$stage/build-gpu/$(dirname "$t")"
  cp "$build/$t" "$stage/build-gpu/$t"
  # Shared libraries from the system that the GPU image lacks or has in another version.
  ldd "$build/$t" | awk '/libyaml-cpp|libpcre2-8/ {print $3}' | while read -r lib; do
    cp -L "$lib" "$stage/build-gpu/$(basename "$lib")"
  done
done
# BASE_LIB / EXP_LIB -> build-base/ / build-exp/libft_attention.so, BASE_BIN -> build-base/flashtrain, when set.
for pair in "${BASE_LIB:-}:build-base/libft_attention.so" "${EXP_LIB:-}:build-exp/libft_attention.so" \
            "${BASE_BIN:-}:build-base/flashtrain" ${EXTRA:-}; do
  file=${pair%:*} dest=${pair##*:}
  [ -n "$file" ] || continue
  [ -f "$file" ] || { echo "gpu_pack_bins: $file (for $dest) does not exist" >&2; exit 1; }
  mkdir -p "$stage/$(dirname "$dest")"
  cp "$file" "$stage/$dest"
done
mkdir -p .gpu
echo "gpu_pack_bins: packing ${#targets[@]} files (xz -9: a minute or two per 50 MB here)"
tar cf - -C "$stage" . | xz -9 -T0 > .gpu/bins.tar.xz
size=$(du -m .gpu/bins.tar.xz | cut -f1)
echo "gpu_pack_bins: .gpu/bins.tar.xz, $size MiB; .gpu in all: $(du -sm .gpu | cut -f1) MiB (the device tool carries 64)"
if [ "$(du -sm .gpu | cut -f1)" -gt 56 ]; then
  echo "gpu_pack_bins: .gpu is near the device tool's 64 MiB (the tree travels too): name fewer targets" >&2
  exit 1
fi
