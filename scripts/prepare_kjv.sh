#!/usr/bin/env bash
# Prepares the default dataset: the King James Bible as GPT-2 token shards.
#
#   scripts/prepare_kjv.sh [OUT_DIR]        (default data/kjv)
#
# Installs Debian's bible-kjv package when the `bible` program is missing (apt-get, as root or
# through sudo), fetches the GPT-2 vocabulary (scripts/fetch_gpt2_bpe.sh), then runs
#   ${FLASHTRAIN:-build/flashtrain} prepare --corpus kjv --out OUT_DIR
# which writes OUT_DIR/train_000000.bin and OUT_DIR/val_000000.bin.
set -euo pipefail

OUT="${1:-data/kjv}"
FLASHTRAIN="${FLASHTRAIN:-build/flashtrain}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v bible >/dev/null 2>&1; then
  echo "prepare_kjv.sh: installing bible-kjv (provides the \`bible\` program and the KJV text)"
  if [[ $(id -u) -eq 0 ]]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get install -y bible-kjv || { $SUDO apt-get update && $SUDO apt-get install -y bible-kjv; }
fi
"$HERE/fetch_gpt2_bpe.sh"
[[ -x "$FLASHTRAIN" ]] || { echo "prepare_kjv.sh: $FLASHTRAIN not found; build first (cmake --build build)" >&2; exit 1; }
exec "$FLASHTRAIN" prepare --corpus kjv --out "$OUT"
