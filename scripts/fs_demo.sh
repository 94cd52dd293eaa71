#!/usr/bin/env bash
# A cairn file-command session over local files. It copies this
# repository's docs into a scratch directory with fsspec's copy rules, lists,
# finds, measures, moves and removes them, showing each command.
#   scripts/fs_demo.sh [SCRATCH_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p cairn-cli
cairn="target/debug/cairn"
scratch="${1:-$(mktemp -d)}"
run() { echo "\$ cairn $*"; "$cairn" "$@"; echo; }

run cp -r docs/ "file://$scratch/docs-copy"
run ls -l "$scratch/docs-copy"
run find --json --maxdepth 1 "$scratch/docs-copy"
run du "$scratch/docs-copy"
run stat --json "$scratch/docs-copy/user-guide.md"
run mv "$scratch/docs-copy/user-guide.md" "$scratch/docs-copy/guide.md"
run cat "$scratch/docs-copy/guide.md" | head -5
run rm -r "$scratch/docs-copy"
echo "done; scratch directory: $scratch"
