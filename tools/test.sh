#!/usr/bin/env bash
# The whole test suite: unit tests (CTest/GoogleTest), Python tests against independent
# references (pytest), the same unit tests under ASan+UBSan, and bounded libFuzzer runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/fetch_model.sh >/dev/null
bash tools/fetch_model.sh qwen2.5-coder-0.5b >/dev/null
bash tools/fetch_model.sh gemma3-270m >/dev/null
bash tools/build.sh build -DTS_PYTHON=ON
# The Python package from the same build: python/tokensieve's files beside the extension.
export TS_BIN=$PWD/build/bin/tokensieve TS_MODELS=$PWD/models PYTHONPATH=$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}

echo "== unit tests (Release)"
ctest --test-dir build --output-on-failure -j "$(nproc)"

echo "== python tests"
python3 -m pytest -q tests/python

echo "== unit tests (ASan + UBSan)"
# One clang build instruments the unit tests and the libFuzzer targets alike (fuzz/build.sh): a
# second compilation of every library under GCC's sanitizers took 24 of CI's minutes.
bash fuzz/build.sh build-asan
# The float32 SmolLM2, Qwen 0.5B and Gemma 3 reference runs, and the registry walk over the real models,
# are minutes under ASan; the Release run above covers them (every policy runs under ASan on stories260K).
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -E "SmolLM2_exact|Qwen05B|Gemma3_270M|PolicyRegistryWalk"

echo "== fuzzing (bounded)"
TS_FUZZ_BUILD=build-asan bash fuzz/run_all.sh "${TS_FUZZ_SECONDS:-30}"
