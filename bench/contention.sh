#!/usr/bin/env bash
# Decode and prefill at -t 1 and -t 2, on a quiet machine and with one core kept busy by another
# process (started and stopped around each measurement), ours and llama.cpp side by side.
#   bash bench/contention.sh                        # SmolLM2 Q4_1, pp256 + tg64, 3 repetitions
#   bash bench/contention.sh --write BENCHMARKS.md  # replace the table between the contention markers
# Any other flag goes to bench/compare_llamacpp.py (-r, --tests, --bin, --json; -m adds a model).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/compare_llamacpp.py --contention -m models/SmolLM2-135M-Instruct.Q4_1.gguf -t 1,2 \
  --tests pp256,tg64 -r 3 "$@"
