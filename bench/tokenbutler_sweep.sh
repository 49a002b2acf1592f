#!/usr/bin/env bash
# WikiText-2 (test) perplexity of paper 001's sparse-decode methods at token sparsity 10-70%, in
# the paper's simulated-decode protocol: non-overlapping windows of CTX tokens, every token scored,
# each position choosing its own keys per query head (layers >= 1, 4 sinks). One CSV row per run.
#
#   bench/tokenbutler_sweep.sh MODEL PREDICTOR [CHUNKS] [CTX] > sweep.csv
#   METHODS="oracle h2o" SPARSITIES="50" bench/tokenbutler_sweep.sh ...   (a subset)
set -euo pipefail
model=$1 predictor=$2 chunks=${3:-8} ctx=${4:-512}
bin=${TOKENSIEVE:-build/bin/tokensieve}
methods=${METHODS:-"dense oracle tokenbutler h2o snapkv quest streaming"}
sparsities=${SPARSITIES:-"10 30 50 70"}

ppl() {
  "$bin" ppl -m "$model" --dataset wikitext2 --protocol stride -c "$ctx" --chunks "$chunks" -t 1 --json "$@" 2>/dev/null |
    python3 -c 'import json, sys; print("%.4f" % json.load(sys.stdin)["ppl"])'
}

echo "method,sparsity,ppl"
for m in $methods; do
  if [ "$m" = dense ]; then
    echo "dense,0,$(ppl)"
    continue
  fi
  for sp in $sparsities; do
    keep=$(python3 -c "print(round(1 - $sp / 100, 2))")
    case $m in
      tokenbutler) spec="tokenbutler:keep=$keep,predictor=$predictor" ;;
      quest) spec="quest:keep=$keep,page=16" ;;
      *) spec="$m:keep=$keep" ;;
    esac
    echo "$m,$sp,$(ppl --policy "$spec")"
  done
done
