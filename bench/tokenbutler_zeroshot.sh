#!/usr/bin/env bash
# Zero-shot accuracy of paper 001's sparse-decode methods at one sparsity (docs/results/tokenbutler.md):
# ARC-Easy, HellaSwag, PIQA, WinoGrande (first LIMIT documents each), every row of a document choosing
# its own keys (simulated decode). One CSV row per (method, task).
#
#   bench/tokenbutler_zeroshot.sh MODEL PREDICTOR [LIMIT] [SPARSITY] > zeroshot.csv
#   METHODS="dense tokenbutler" bench/tokenbutler_zeroshot.sh ...   (a subset; tokenbutler_shared = shared=1)
set -euo pipefail
model=$1 predictor=$2 limit=${3:-200} sparsity=${4:-50}
bin=${TOKENSIEVE:-build/bin/tokensieve}
methods=${METHODS:-"dense oracle tokenbutler tokenbutler_shared h2o snapkv quest streaming"}
keep=$(python3 -c "print(round(1 - $sparsity / 100, 2))")
tasks=arc_easy,hellaswag,piqa,winogrande

echo "method,sparsity,task,n,acc,acc_stderr,acc_norm"
for m in $methods; do
  case $m in
    dense) spec=() ;;
    tokenbutler) spec=(--policy "tokenbutler:keep=$keep,predictor=$predictor") ;;
    tokenbutler_shared) spec=(--policy "tokenbutler:keep=$keep,predictor=$predictor,shared=1") ;;
    quest) spec=(--policy "quest:keep=$keep,page=16") ;;
    *) spec=(--policy "$m:keep=$keep") ;;
  esac
  "$bin" eval -m "$model" -t 1 --task "$tasks" --limit "$limit" --json "${spec[@]}" 2>/dev/null |
    python3 -c '
import json, sys
r = json.load(sys.stdin)
for task in sys.argv[3].split(","):
    t = r[task]
    print(",".join(map(str, [sys.argv[1], sys.argv[2], task, t["n"], t["acc"], t["acc_stderr"], t["acc_norm"]])))
' "$m" "$sparsity" "$tasks"
done
