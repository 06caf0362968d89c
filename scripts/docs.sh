#!/usr/bin/env bash
# Builds the reference (HTML) from the public headers' /// comments with Doxygen (docs/Doxyfile) into
# build/docs/html. Fails on any Doxygen warning, among them a public name without documentation.
# Usage: scripts/docs.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
ensure_packages doxygen
rm -rf build/docs
mkdir -p build/docs
warnings=build/docs/warnings.log
status=0
doxygen docs/Doxyfile 2>"$warnings" || status=$?
if [[ $status -ne 0 || -s $warnings ]]; then
    cat "$warnings" >&2
    echo "docs: FAILED: $(grep -c . "$warnings") warnings (doxygen exited $status); see above" >&2
    exit 1
fi
echo "docs: no warnings; the reference is $PWD/build/docs/html/index.html"
