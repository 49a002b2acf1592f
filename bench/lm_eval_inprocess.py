#!/usr/bin/env python3
"""PIQA through three doors, same documents, one after another on a quiet machine: `tokensieve eval`,
lm-evaluation-harness with the in-process `tokensieve` model (tokensieve.lm_eval), and lm-eval's
`local-completions` against `tokensieve serve`. Prints one JSON object: each side's acc / acc_norm and
wall time, and the largest per-choice log-likelihood difference from `tokensieve eval`
(docs/results/eval_parity.md).

Usage: PYTHONPATH=build/python python3 bench/lm_eval_inprocess.py [--limit 500] [--threads 2] [--policy SPEC]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests" / "python")]
import lm_eval  # noqa: E402
import lm_eval_parity  # noqa: E402
from server_process import Server  # noqa: E402

import tokensieve.lm_eval as ts_lm_eval  # noqa: E402


def worst_diff(ours: dict, out: dict) -> float:
    return max(abs(a - float(b[0])) for s in out["samples"]["piqa"]
               for a, b in zip(ours[s["doc_id"]], s["filtered_resps"], strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=str(ROOT / "build/bin/tokensieve"))
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared/data"))
    ap.add_argument("--limit", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--policy", default="", help="tokensieve.lm_eval's policy= form (';' in a spec, '+' between)")
    args = ap.parse_args()
    lm_eval_parity.datasets.load_dataset = lambda path, name=None, **_: lm_eval_parity.local_dataset(
        args.data_dir, path, name)
    specs = ts_lm_eval.policy_specs(args.policy)
    result = {"model": args.model, "limit": args.limit, "threads": args.threads, "policies": specs}

    with tempfile.TemporaryDirectory() as tmp:
        samples = pathlib.Path(tmp) / "samples.jsonl"
        t0 = time.perf_counter()
        res = subprocess.run([args.bin, "eval", "-m", args.model, "--task", "piqa", "--limit", str(args.limit),
                              "-t", str(args.threads), "--data-dir", args.data_dir, "--samples", str(samples), "--json",
                              *[a for s in specs for a in ("--policy", s)]],
                             capture_output=True, text=True, check=True)
        eval_s = time.perf_counter() - t0
        ours = json.loads(res.stdout)["piqa"]
        lls = {s["doc_id"]: s["lls"] for s in map(json.loads, samples.read_text().splitlines())}
    result["tokensieve eval"] = {"acc": ours["acc"], "acc_norm": ours["acc_norm"], "seconds": round(eval_s, 1)}

    t0 = time.perf_counter()
    out = lm_eval.simple_evaluate(model="tokensieve", tasks=["piqa"], num_fewshot=0, limit=args.limit,
                                  log_samples=True,
                                  model_args=f"pretrained={args.model},threads={args.threads},policy={args.policy}")
    r = out["results"]["piqa"]
    result["lm-eval tokensieve (in-process)"] = {"acc": r["acc,none"], "acc_norm": r["acc_norm,none"],
                                                 "seconds": round(time.perf_counter() - t0, 1),
                                                 "max_abs_ll_diff": worst_diff(lls, out)}
    if not specs:  # the server's requests carry no policy here: dense only
        with Server(args.bin, args.model, threads=args.threads) as server:
            t0 = time.perf_counter()
            out = lm_eval.simple_evaluate(
                model="local-completions", tasks=["piqa"], num_fewshot=0, limit=args.limit, log_samples=True,
                model_args={"base_url": server.url + "/v1/completions", "model": "SmolLM2",
                            "tokenizer_backend": "remote", "tokenized_requests": True, "num_concurrent": 1,
                            "max_retries": 1})
            secs = time.perf_counter() - t0
            server.stop()
        r = out["results"]["piqa"]
        result["lm-eval local-completions (server)"] = {"acc": r["acc,none"], "acc_norm": r["acc_norm,none"],
                                                        "seconds": round(secs, 1),
                                                        "max_abs_ll_diff": worst_diff(lls, out)}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
