#!/usr/bin/env bash
# The public API of the two library crates, cairn-fs and cairn-checkpoint,
# with the cargo features a user turns on (cairn-fs: object-store, tclake;
# cairn-checkpoint has none but its internals, which promise nothing): one line
# per item (scripts/public_api.py), compared with docs/public-api/<crate>.txt
# so that a change to the public surface is seen in review. rustdoc's JSON
# output is unstable, hence RUSTC_BOOTSTRAP; its warnings (broken doc links
# included) are errors.
#
#   scripts/public-api.sh           # compare (CI)
#   scripts/public-api.sh --write   # rewrite the listings after a change
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
status=0
declare -A features=([cairn-fs]="object-store,tclake" [cairn-checkpoint]="")
for crate in cairn-fs cairn-checkpoint; do
    RUSTC_BOOTSTRAP=1 cargo rustdoc -q -p "$crate" --lib --features "${features[$crate]}" -- \
        -Z unstable-options --output-format json -D warnings
    listing="docs/public-api/$crate.txt"
    "$python" scripts/public_api.py "target/doc/${crate//-/_}.json" > "target/$crate.public-api.txt"
    if [[ "${1:-}" == "--write" ]]; then
        cp "target/$crate.public-api.txt" "$listing"
        echo "wrote $listing ($(wc -l < "$listing") items)"
    elif ! diff -u "$listing" "target/$crate.public-api.txt"; then
        echo "the public API of $crate changed (above: - listed, + now);" \
            "if that is meant, run scripts/public-api.sh --write and commit $listing" >&2
        status=1
    fi
done
exit $status
