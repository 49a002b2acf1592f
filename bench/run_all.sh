#!/usr/bin/env bash
# The issue-3 benchmark set, side by side with llama.cpp in one run per configuration:
# pp512, tg128 at depth 0 and tg128 at depth 4096, with the given threads (default: all cores).
# Output: markdown tables on stdout (paste into BENCHMARKS.md) and JSON lines in bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
threads=${THREADS:-$(nproc)}
reps=${REPS:-5}
mkdir -p bench/results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=bench/results/compare-$stamp.jsonl
echo "model $model, threads $threads, reps $reps, $(date -u)"
for cfg in "-p 512 -n 0 -d 0" "-p 0 -n 128 -d 0" "-p 0 -n 128 -d 4096"; do
  # shellcheck disable=SC2086
  python3 bench/compare_llamacpp.py -m "$model" -t "$threads" -r "$reps" $cfg --json | tee -a "$out" >/dev/null
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| test | ours t/s (median) | llama.cpp t/s (median) | ratio min | ratio median | ratio max |")
print("|---|---|---|---|---|---|")
for r in rows:
    for key, name in (("prefill_tps", f"pp{r['n_prompt']}"), ("decode_tps", f"tg{r['n_gen']} @ d{r['depth']}")):
        if key in r:
            x = r[key]
            print(f"| {name} | {x['ours']['median']:.1f} | {x['llama_cpp']['median']:.1f} | {x['ratio']['min']:.2f} | "
                  f"{x['ratio']['median']:.2f} | {x['ratio']['max']:.2f} |")
print(f"\nmachine read bandwidth (tokensieve probe): {rows[-1]['machine_bandwidth_gbs']:.1f} GB/s")
PY
