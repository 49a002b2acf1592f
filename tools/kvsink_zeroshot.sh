#!/usr/bin/env bash
# Zero-shot grid of docs/results/kvsink.md: piqa and arc_easy (first LIMIT documents each) with FP16
# KV, and INT4 / INT2 KV (group GROUP, keys per token or per channel) x {none, PFN-5, KVSink-5}, under
# fake-quant prefill (prefill=quantized: the context attends to its own K/V quantized, as in the
# perplexity grid; with prefill=full a one-call scoring pass would never read a code).
# Usage: tools/kvsink_zeroshot.sh MODEL PROFILE OUT.csv [LIMIT] [MODES] [BITS] [GROUP]
# (BITS "16 4 2" by default; 16 is the FP16 row; split BITS over two runs to use two cores.
# GROUP 128 by default. KIVI keys stay in the half-precision window until a block of GROUP tokens
# is complete, so with GROUP 128 the short piqa / arc_easy contexts never read a coded key under
# mode=kivi: use GROUP 32 there.)
set -euo pipefail
model=$1 profile=$2 out=$3 limit=${4:-200} modes=${5:-"kivi token"} bits_list=${6:-"16 4 2"} group=${7:-128}
bin=${TS_BIN:-build/bin/tokensieve}
echo "bits,mode,group,preserve,task,n,acc,acc_stderr,acc_norm" > "$out"
eval_row() {  # bits mode preserve policies...
  local bits=$1 mode=$2 pres=$3
  shift 3
  "$bin" eval -m "$model" -t 1 --task piqa,arc_easy --limit "$limit" --json "$@" 2>/dev/null |
    python3 -c '
import json, sys
r = json.load(sys.stdin)
for task in ("piqa", "arc_easy"):
    m = r[task]
    print(",".join(map(str, [sys.argv[1], sys.argv[2], sys.argv[4], sys.argv[3], task, m["n"], m["acc"], m["acc_stderr"], m["acc_norm"]])))
' "$bits" "$mode" "$pres" "$group" | tee -a "$out"
}
for bits in $bits_list; do
  if [ "$bits" = 16 ]; then
    eval_row 16 - none
    continue
  fi
  for mode in $modes; do
    q="kvquant:bits=$bits,group=$group,mode=$mode,prefill=quantized"
    eval_row "$bits" "$mode" none --policy "$q"
    eval_row "$bits" "$mode" pfn --policy "$q" --policy pfn:n=5
    eval_row "$bits" "$mode" kvsink --policy "$q" --policy "kvsink:k=5,profile=$profile"
  done
done
