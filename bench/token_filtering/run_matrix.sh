#!/bin/bash
# Token Filtering evaluation matrix on SmolLM2-135M-Instruct Q4_1, -t 1, one process at a time.
cd "$(dirname "$0")/../.."
M=models/SmolLM2-135M-Instruct.Q4_1.gguf
B=build/bin/tokensieve
OUT=${OUT:-docs/results/token_filtering}; mkdir -p $OUT
ppl() {  # ctx chunks policy...
  local ctx=$1 chunks=$2; shift 2
  local args=(); for p in "$@"; do args+=(--policy "$p"); done
  # 128: the paper's (LLM-Pruner's) non-overlapping 128-token windows scored whole; 512: llama.cpp's.
  local proto=llamacpp; [ $ctx = 128 ] && proto=stride
  local j; j=$($B ppl -m $M --dataset wikitext2 --protocol $proto -c $ctx --chunks $chunks -t 1 --json "${args[@]}" 2>/dev/null)
  echo "{\"ctx\":$ctx,\"policy\":\"$*\",\"result\":$j}" >> $OUT/ppl.jsonl
}
tasks() {  # policy...
  local args=(); for p in "$@"; do args+=(--policy "$p"); done
  local j; j=$($B eval -m $M --task piqa,arc_easy,arc_challenge,hellaswag,winogrande,boolq --limit 50 -t 1 --json "${args[@]}" 2>/dev/null)
  echo "{\"policy\":\"$*\",\"result\":$j}" >> $OUT/tasks.jsonl
}
if [ "$1" = ppl128 ]; then
  ppl 128 40
  for r in 0.2 0.3 0.4 0.5; do
    ppl 128 40 tokenfilter:ratio=$r
    ppl 128 40 tokenfilter:ratio=$r,state=run
    ppl 128 40 tokenfilter:ratio=$r,placement=uniform
    ppl 128 40 tokenfilter:ratio=$r,placement=head
    ppl 128 40 tokenfilter:ratio=$r,select=random
    ppl 128 40 tokenfilter:ratio=$r,select=random,placement=uniform
    ppl 128 40 attnremove:ratio=$r
  done
  ppl 128 40 tokenfilter:ratio=0.5,tail=0.75
  ppl 128 40 tokenfilter:ratio=0.5,tail=0.75,select=random
  for x in select=k select=v fusion=intent fusion=mean kv=cache anchor=mean decide=call variance=running; do
    ppl 128 40 tokenfilter:ratio=0.3,$x
  done
  ppl 128 40 tokenfilter:ratio=0.3,select=random,kv=cache
fi
if [ "$1" = ppl512 ]; then
  ppl 128 40 tokenfilter:ratio=0.1
  ppl 128 40 tokenfilter:ratio=0.1,placement=uniform
  ppl 128 40 tokenfilter:ratio=0.1,select=random
  ppl 128 40 attnremove:ratio=0.1
  for x in select=k select=v fusion=intent fusion=mean; do ppl 128 40 tokenfilter:ratio=0.3,state=run,$x; done
  ppl 512 10
  for r in 0.2 0.3 0.4 0.5; do
    ppl 512 10 tokenfilter:ratio=$r
    ppl 512 10 tokenfilter:ratio=$r,select=random
    ppl 512 10 attnremove:ratio=$r
  done
fi
if [ "$1" = tasks ]; then
  tasks
  for r in 0.2 0.3 0.4 0.5; do tasks tokenfilter:ratio=$r; done
  tasks tokenfilter:ratio=0.2,select=random
  tasks tokenfilter:ratio=0.2,placement=uniform
fi
