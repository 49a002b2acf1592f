#!/usr/bin/env bash
# Builds every libFuzzer target (fuzz/build.sh, into $TS_FUZZ_BUILD or build-fuzz/) and runs each for a
# bounded time (seconds = $1, default 30).
# Seeds: the real model files, so the fuzzer starts from valid GGUF/text and mutates from there, and
# fuzz/seeds/<target>/ (policy specs, request bodies, policy files).
# Prints executions per target; exits non-zero if any target finds a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
dir=${TS_FUZZ_BUILD:-build-fuzz}
bash fuzz/build.sh "$dir"
export TS_FUZZ_MODEL=${TS_FUZZ_MODEL:-$PWD/../shared/models/stories260K.gguf}
export TS_FUZZ_GPT2_MODEL=${TS_FUZZ_GPT2_MODEL:-$PWD/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -x fuzz/make_corpus.sh ] && bash fuzz/make_corpus.sh "$PWD/../shared" >/dev/null
status=0
for bin in "$dir"/bin/fuzz_*; do
  name=$(basename "$bin")
  corpus=fuzz/corpus-${name#fuzz_}
  mkdir -p "$corpus"
  # Committed seeds (fuzz/seeds/<target>/) start the corpus; what the fuzzer adds stays git-ignored.
  [ -d "fuzz/seeds/${name#fuzz_}" ] && cp -n "fuzz/seeds/${name#fuzz_}"/* "$corpus"/
  log=$(mktemp)
  if "$bin" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$corpus/" >"$log" 2>&1; then
    execs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "$name: ${execs} executions in ${seconds}s, no crash"
  else
    echo "$name: CRASH (artifacts in $corpus)"; tail -n 30 "$log"; status=1
  fi
  rm -f "$log"
done
exit $status
