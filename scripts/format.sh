#!/usr/bin/env bash
# Formats the C++ sources with clang-format 16 (.clang-format at the top, 4-space indents under examples/ and
# test/consumer/). Usage: scripts/format.sh          rewrite the files
#                         scripts/format.sh --check  change nothing; fail if a file is not formatted
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
ensure_packages clang-format-16
mapfile -t files < <(git ls-files 'include/*.hpp' 'src/*.cpp' 'test/*.hpp' 'test/*.cpp' 'bench/*.hpp' 'bench/*.cpp' \
    'examples/*.hpp' 'examples/*.cpp')
if [[ ${1:-} == --check ]]; then
    clang-format-16 --dry-run -Werror "${files[@]}"
    echo "format: ${#files[@]} files formatted"
else
    clang-format-16 -i "${files[@]}"
fi
