#!/usr/bin/env python3
"""Compares `tokensieve eval --samples` output with lm-evaluation-harness, document by document.

  prompts:  the (context, continuation) strings of every request, against the requests lm-eval's own task
            configs build from the same data files (no model run);
  scores:   with --lm-eval-samples DIR (tools/lm_eval_parity.py --samples DIR), also the log-likelihood of every
            choice, and how often acc / acc_norm decisions differ.

Usage:
  tools/lm_eval_compare.py OURS.samples.jsonl [--data-dir ../shared/data] [--lm-eval-samples DIR]
Prints one line per task; exits 1 if any prompt differs.
"""
import argparse
import json
import os
import sys

import datasets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_eval_parity  # noqa: E402


def lm_eval_requests(data_dir, tasks):
    """{task: {doc_id: [[context, continuation], ...]}} as lm-eval builds them (zero-shot)."""
    from lm_eval.tasks import TaskManager, get_task_dict

    datasets.load_dataset = lambda path, name=None, **_: lm_eval_parity.local_dataset(data_dir, path, name)
    out = {}
    for name, task in get_task_dict(tasks, TaskManager()).items():
        task.set_config(key="num_fewshot", value=0)
        task.build_all_requests(limit=None, rank=0, world_size=1)
        reqs = {}
        for inst in task.instances:
            reqs.setdefault(inst.doc_id, []).append(list(inst.args))
        out[name] = reqs
    return out


def argmax(xs):
    return max(range(len(xs)), key=lambda i: (xs[i], -i))  # first maximum, as np.argmax


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours")
    ap.add_argument("--data-dir", default=os.environ.get("TS_DATA_DIR", "../shared/data"))
    ap.add_argument("--lm-eval-samples")
    args = ap.parse_args()

    ours = {}
    with open(args.ours) as f:
        for line in f:
            s = json.loads(line)
            ours.setdefault(s["task"], {})[s["doc_id"]] = s
    expected = lm_eval_requests(os.path.abspath(args.data_dir), list(ours))
    bad = False
    for task, docs in ours.items():
        want = expected[task]
        prompt_diff = sum(docs[d]["requests"] != want.get(d) for d in docs)
        bad |= prompt_diff > 0
        line = f"{task:14s} docs {len(docs):5d}  prompt mismatches {prompt_diff}"
        if args.lm_eval_samples:
            ref = {}
            with open(os.path.join(args.lm_eval_samples, f"{task}.jsonl")) as f:
                for l in f:
                    s = json.loads(l)
                    ref[s["doc_id"]] = s["lls"]
            common = [d for d in docs if d in ref]
            deltas = [a - b for d in common for a, b in zip(docs[d]["lls"], ref[d])]
            flips = sum(argmax(docs[d]["lls"]) != argmax(ref[d]) for d in common)
            line += (f"  |dll| mean {sum(map(abs, deltas)) / len(deltas):.4f} max {max(map(abs, deltas)):.4f}"
                     f"  acc decisions differing {flips}/{len(common)}")
        print(line)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
