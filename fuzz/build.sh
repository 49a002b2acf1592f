#!/usr/bin/env bash
# The sanitized build (clang, ASan + UBSan, libFuzzer's coverage): the libFuzzer targets and the unit
# tests from one compilation of the libraries, into the directory $1 (default build-fuzz).
# The build's output is kept quiet unless it fails: then its errors are what CI must show.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-fuzz}
build_log=$(mktemp)
if ! { cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
         -DTS_FUZZ=ON -DTS_TESTS=ON -DTS_BENCH=OFF && cmake --build "$dir" -j "$(nproc)" --target fuzz_targets ts_tests; } \
       >"$build_log" 2>&1; then
  echo "sanitized build failed:"; grep -E -A8 'error:|FAILED' "$build_log" | head -n 80 || tail -n 40 "$build_log"
  rm -f "$build_log"; exit 1
fi
rm -f "$build_log"
