# Sourced by the device-call scripts (scripts/gpu_check.sh, bench/attention/dev/ws_call.sh,
# bench/train/dev/copy_engine_call.sh): gpu_unpack puts the binaries that scripts/gpu_pack_bins.sh
# packed into .gpu/bins.tar.xz (build-gpu/, and build-base/ or build-exp/ when packed) into the repo
# root, and puts build-gpu/ (where the shared libraries this machine lacks travel) on
# LD_LIBRARY_PATH. Run from the repo root; returns non-zero, saying why, when there is nothing to
# unpack.
gpu_unpack() {
  [ -f .gpu/bins.tar.xz ] || { echo "unpack: no .gpu/bins.tar.xz (scripts/gpu_pack_bins.sh, then carry .gpu)"; return 1; }
  python3 -c "import tarfile; tarfile.open('.gpu/bins.tar.xz').extractall('.')" || return 1
  export LD_LIBRARY_PATH=$PWD/build-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "unpack: $(find build-gpu -type f | wc -l) files into build-gpu/"
}
