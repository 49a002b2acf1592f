#!/usr/bin/env bash
# Fresh machine to first output: install dependencies, build, fetch the default model, chat once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/build.sh build -DTS_PYTHON=ON
model=$(bash tools/fetch_model.sh)
build/bin/tokensieve run -m "$model" --chat -p "What is the capital of France?" -n 64 --temp 0
