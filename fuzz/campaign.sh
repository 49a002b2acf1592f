#!/usr/bin/env bash
# A long fuzzing campaign: every target until it has run $1 executions (default 10 million), one
# target at a time (the machine has 2 cores), corpora kept in fuzz/corpus-*/ between campaigns.
# Prints per target: executions, seconds, corpus entries, coverage (libFuzzer's cov/ft) and findings;
# docs/reliability.md records the campaigns. Needs the build of fuzz/build.sh ($TS_FUZZ_BUILD or build-fuzz/).
# Usage: fuzz/campaign.sh [executions] [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10000000}
shift || true
export TS_FUZZ_MODEL=${TS_FUZZ_MODEL:-$PWD/../shared/models/stories260K.gguf}
export TS_FUZZ_GPT2_MODEL=${TS_FUZZ_GPT2_MODEL:-$PWD/models/SmolLM2-135M-Instruct.Q4_1.gguf}
dir=${TS_FUZZ_BUILD:-build-fuzz}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=($(cd "$dir"/bin && ls fuzz_*))
printf "| target | executions | seconds | exec/s | corpus | cov | ft | findings |\n|---|---|---|---|---|---|---|---|\n"
for name in "${targets[@]}"; do
  corpus=fuzz/corpus-${name#fuzz_}
  mkdir -p "$corpus"
  [ -d "fuzz/seeds/${name#fuzz_}" ] && cp -n "fuzz/seeds/${name#fuzz_}"/* "$corpus"/
  # Files (GGUF, policy files) and request bodies up to 64 KiB; text for the tokenizers up to 4 KiB:
  # they work word by word, so a longer input repeats what a short one reaches at a sixth of the
  # speed (10 million executions would take 2 hours each instead of 25 minutes).
  case "$name" in fuzz_tokenizer_*) max_len=4096 ;; *) max_len=65536 ;; esac
  log=$(mktemp)
  start=$(date +%s)
  status=0
  "$dir"/bin/"$name" "$corpus" -runs="$runs" -rss_limit_mb=2048 -max_len=$max_len -print_final_stats=1 \
      -artifact_prefix="$corpus/" >"$log" 2>&1 || status=$?
  secs=$(( $(date +%s) - start ))
  execs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  last=$(grep -E '^#[0-9]+' "$log" | tail -n1)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  findings=$([ $status -eq 0 ] && echo none || echo "crash: $(ls "$corpus"/crash-* 2>/dev/null | head -n1)")
  printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n" "$name" "$execs" "$secs" \
      "$([ "$execs" != "?" ] && [ $secs -gt 0 ] && echo $((execs / secs)) || echo "?")" \
      "$(ls "$corpus" | wc -l)" "$cov" "$ft" "$findings"
  [ $status -ne 0 ] && tail -n 30 "$log" >&2
  rm -f "$log"
done
