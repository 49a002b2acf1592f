#!/bin/bash
# Speed through `tokensieve run` (prompt tok/s and generation tok/s on its stderr line): every
# configuration once per repetition, in turn, so that the shared machine's noise hits all alike.
#   speed_run.sh PROMPT_FILE N_GEN REPS CTX [long|long_cache] > OUT.jsonl
cd "$(dirname "$0")/../.."
B=${B:-build/bin/tokensieve}
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPT=$1; N=$2; REPS=$3; CTX=$4
CONFIGS=("" "attnremove:ratio=1" "tokenfilter:ratio=0.2" "tokenfilter:ratio=0.3" "tokenfilter:ratio=0.4"
         "tokenfilter:ratio=0.5" "tokenfilter:ratio=0.5,kv=cache" "attnremove:ratio=0.5" "attnremove:ratio=0.5,kv=cache")
[ "$5" = long ] && CONFIGS=("" "attnremove:ratio=1" "tokenfilter:ratio=0.2" "tokenfilter:ratio=0.5")
[ "$5" = long_cache ] && CONFIGS=("" "tokenfilter:ratio=0.5,kv=cache" "attnremove:ratio=0.5,kv=cache")
for rep in $(seq $REPS); do
  for c in "${CONFIGS[@]}"; do
    args=(); [ -n "$c" ] && args=(--policy "$c")
    line=$($B run -m $M -p "$(cat $PROMPT)" -n $N --ignore-eos --temp 0 -c $CTX -t 1 "${args[@]}" 2>&1 >/dev/null | grep "^prompt:")
    echo "{\"rep\":$rep,\"prompt\":\"$PROMPT\",\"policy\":\"$c\",\"line\":\"$line\"}"
  done
done
