#!/usr/bin/env bash
# Perplexity grid of docs/results/kvsink.md (the issue's): FP16 KV; INT4 and INT2 x {none, PFN-5,
# KVSink-5} x {per-token, KIVI} x group {32, 128} on WikiText-2 and C4, and the K sweep
# {0, 5, 10, 15, 20} at INT2 per-token group 128. Fake-quant prefill (prefill=quantized), the
# paper's protocol.
# GRID=static instead: the static-range schemes (S1 per-token K/V, S3 per-channel K + per-token V)
# at INT4 and INT2 x {none, PFN-5, KVSink-5}, each with the range set calibrated without the
# tokens it preserves (the PROFILE of tokensieve calibrate kvsink).
# Usage: tools/kvsink_eval.sh MODEL PROFILE OUT.csv [CHUNKS] [CTX] [GRID=dynamic|static]
set -euo pipefail
model=$1 profile=$2 out=$3 chunks=${4:-2} ctx=${5:-512} grid=${6:-dynamic}
bin=${TS_BIN:-build/bin/tokensieve}
echo "dataset,bits,mode,group,preserve,k,ppl" > "$out"
ppl() {  # dataset bits mode group preserve k policies...
  local ds=$1 bits=$2 mode=$3 group=$4 pres=$5 k=$6
  shift 6
  local v
  v=$("$bin" ppl -m "$model" -t 1 -c "$ctx" --dataset "$ds" --chunks "$chunks" --json "$@" 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["ppl"])')
  echo "$ds,$bits,$mode,$group,$pres,$k,$v" | tee -a "$out"
}
three() {  # dataset bits mode group: none, PFN-5, KVSink-5
  local q="kvquant:bits=$2,group=$4,mode=$3,prefill=quantized"
  ppl "$1" "$2" "$3" "$4" none 0 --policy "$q"
  ppl "$1" "$2" "$3" "$4" pfn 5 --policy "$q" --policy pfn:n=5
  ppl "$1" "$2" "$3" "$4" kvsink 5 --policy "$q" --policy "kvsink:k=5,profile=$profile"
}
if [ "$grid" = static ]; then
  for bits in 4 2; do for mode in token kivi; do
    q="kvquant:bits=$bits,group=128,mode=$mode,prefill=quantized,ranges=static,profile=$profile"
    ppl wikitext2 "$bits" "$mode-static" 128 none 0 --policy "$q,excluding=none"
    ppl wikitext2 "$bits" "$mode-static" 128 pfn 5 --policy "$q,excluding=pfn" --policy pfn:n=5
    ppl wikitext2 "$bits" "$mode-static" 128 kvsink 5 --policy "$q,excluding=kvsink" --policy "kvsink:k=5,profile=$profile"
  done; done
  exit 0
fi
for ds in wikitext2 c4; do
  ppl "$ds" 16 - - none 0
  for bits in 2 4; do for mode in token kivi; do for group in 32 128; do
    three "$ds" "$bits" "$mode" "$group"
  done; done; done
done
for k in 10 15 20; do
  q="kvquant:bits=2,group=128,mode=token,prefill=quantized"
  ppl wikitext2 2 token 128 pfn "$k" --policy "$q" --policy "pfn:n=$k"
  ppl wikitext2 2 token 128 kvsink "$k" --policy "$q" --policy "kvsink:k=$k,profile=$profile"
done
