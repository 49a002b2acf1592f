#!/usr/bin/env python3
"""Markdown tables from the Token Filtering matrix (docs/results/token_filtering/*.jsonl by default)."""
import json, sys, os
D = sys.argv[1] if len(sys.argv) > 1 else 'docs/results/token_filtering'

def load(name):
    p = os.path.join(D, name)
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []

def skipped(r):
    s = r['result'].get('sparsity')
    return 0.0 if not s else 1 - s['attention_fraction']

print('### PPL')
for row in load('ppl.jsonl'):
    r = row['result']
    print(f"| {row['ctx']} | `{row['policy'] or 'dense'}` | {100*skipped(row):.1f} | {r['ppl']:.2f} ± {r['ppl_stderr']:.2f} |")

TASKS = ['boolq', 'piqa', 'hellaswag', 'winogrande', 'arc_easy', 'arc_challenge']
METRIC = {'hellaswag': 'acc_norm', 'arc_challenge': 'acc_norm'}  # the paper's convention (note 3)
print('### Tasks')
for row in load('tasks.jsonl'):
    r = row['result']
    vals = [100 * r[t][METRIC.get(t, 'acc')] for t in TASKS]
    print(f"| `{row['policy'] or 'dense'}` | {100*skipped(row):.1f} | " + ' | '.join(f'{v:.1f}' for v in vals) +
          f" | {sum(vals)/len(vals):.2f} |")

import re, statistics as st, collections
def speed(name, share=None):
    """share: (A_prefill, A_decode) from another file when this one has no attnremove:ratio=1."""
    rows = load(name)
    if not rows: return
    d = collections.defaultdict(lambda: ([], []))
    for r in rows:
        m = re.search(r'prompt: (\d+) tokens, ([\d.]+) tok/s \| generation: (\d+) tokens, ([\d.]+) tok/s', r['line'])
        d[r['policy']][0].append(float(m[2])); d[r['policy']][1].append(float(m[4]))
        n_prompt = int(m[1])
    base = d['']
    rm = d['attnremove:ratio=1']
    # Attention share A: the fraction of dense time that removing Q/attention/O from every layer saves.
    if share:
        a_pp, a_tg = share
    else:
        a_pp = 1 - st.median([b / a for a, b in zip(rm[0], base[0])])
        a_tg = 1 - st.median([b / a for a, b in zip(rm[1], base[1])])
    print(f"| `attnremove:ratio=1` (defines A) | {st.median(rm[0]):.1f} | {1/(1-a_pp):.3f} | — | {1000/st.median(rm[1]):.1f} | {1/(1-a_tg):.3f} | — |" if rm[0] else '')
    print(f'### Speed {name}: prompt {n_prompt} tokens; A_prefill = {a_pp:.3f}, A_decode = {a_tg:.3f}')
    for k, (p, g) in d.items():
        if k == 'attnremove:ratio=1': continue
        ratio = 0.0
        m = re.search(r'ratio=([\d.]+)', k)
        if m: ratio = float(m[1])
        rp = st.median([a / b for a, b in zip(p, base[0])]); rg = st.median([a / b for a, b in zip(g, base[1])])
        pred_p = 1 / (1 - ratio * a_pp); pred_g = 1 / (1 - ratio * a_tg)
        print(f"| `{k or 'dense'}` | {st.median(p):.1f} | {rp:.3f} | {pred_p:.3f} | {1000/st.median(g):.1f} | {rg:.3f} | {pred_g:.3f} |")
speed('speed_short.jsonl')
speed('speed_long.jsonl')
speed('speed_long_cache.jsonl', share=(0.457, 0.540))
