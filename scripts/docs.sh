#!/usr/bin/env bash
# Builds and checks the guide (docs/, an mdBook) and the README:
#
#   scripts/docs.sh
#
# 1. the performance page, its plot, the records' index and the README's
#    headline table are current with bench/results/*.json (regenerated into
#    a temporary folder by scripts/perf-page.py and compared byte for byte)
# 2. the book builds (mdBook, pinned, installed into .tools/ the first time
#    by scripts/setup-docs.sh) into target/book/
# 3. no broken link or anchor in the markdown (README.md, docs/, bench/) nor
#    in the built HTML; every C, C++ and Python block of the README is an
#    excerpt of an example file, which the test command builds and runs
#    (scripts/check-docs.py). The book includes the example files themselves.
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
trap 'echo "scripts/docs.sh: line $LINENO: exit status $? from: $BASH_COMMAND" >&2' ERR

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Generated files are committed; a record added without regenerating them
# would leave the page and the README behind the records.
python3 scripts/perf-page.py --out-dir "$tmp"
stale=0
for f in docs/performance.md docs/performance.svg bench/results/INDEX.md README.md; do
    if ! cmp -s "$tmp/$f" "$f"; then
        echo "docs: $f is stale: run scripts/perf-page.py and commit the result" >&2
        diff -u "$f" "$tmp/$f" | head -20 >&2 || true
        stale=1
    fi
done
[[ $stale -eq 0 ]]

mdbook=$(scripts/setup-docs.sh | tail -1)
rm -rf target/book
# mdBook reports a missing {{#include}} file only as a warning: fail on it.
"$mdbook" build 2>"$tmp/mdbook.log" || { cat "$tmp/mdbook.log" >&2; exit 1; }
if grep -E 'ERROR|WARN' "$tmp/mdbook.log" >&2; then
    echo "docs: mdbook build reported the problems above" >&2
    exit 1
fi

python3 scripts/check-docs.py target/book
echo "docs: the book is in target/book/index.html" >&2
