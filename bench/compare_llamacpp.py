#!/usr/bin/env python3
"""Side-by-side throughput: tokensieve vs llama.cpp (through llama-cpp-python) on the same GGUF,
threads, prompt length, generation length and depth, repetitions interleaved in one run.

    python3 bench/compare_llamacpp.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2 -p 512 -n 128 -d 0 -r 5

Prints a table of tokens/s and the ratio ours/llama.cpp (min / median / max over repetitions);
--json prints one object. llama.cpp runs in this process through llama-cpp-python's low-level API
(llama_decode on batches), with its default F16 KV cache, as our engine uses.
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LlamaCpp:
    def __init__(self, model, threads, n_ctx):
        import llama_cpp as L

        self.L = L
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = L.llama_model_load_from_file(model.encode(), mp)
        if not self.model:
            sys.exit(f"error: llama.cpp could not load {model}")
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = 512
        cp.n_ubatch = 512
        cp.n_threads = threads
        cp.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(self.model, cp)
        self.n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))
        self.batch = L.llama_batch_init(512, 0, 1)

    def clear(self):
        self.L.llama_memory_clear(self.L.llama_get_memory(self.ctx), True)

    def decode(self, tokens, pos0):
        """Evaluates tokens in batches of up to 512, logits for the last token only."""
        b = self.batch
        for start in range(0, len(tokens), 512):
            chunk = tokens[start:start + 512]
            b.n_tokens = len(chunk)
            for i, t in enumerate(chunk):
                b.token[i] = t
                b.pos[i] = pos0 + start + i
                b.n_seq_id[i] = 1
                b.seq_id[i][0] = 0
                b.logits[i] = i == len(chunk) - 1
            if self.L.llama_decode(self.ctx, b) != 0:
                sys.exit("error: llama_decode failed")
        self.L.llama_synchronize(self.ctx)

    def bench(self, n_prompt, n_gen, depth, rng):
        out = {}
        if n_prompt:
            toks = [rng.randrange(100, self.n_vocab) for _ in range(n_prompt)]
            self.clear()
            t0 = time.perf_counter()
            self.decode(toks, 0)
            out["prefill_tps"] = n_prompt / (time.perf_counter() - t0)
        if n_gen:
            self.clear()
            if depth:
                self.decode([rng.randrange(100, self.n_vocab) for _ in range(depth)], 0)
            gen = [rng.randrange(100, self.n_vocab) for _ in range(n_gen)]
            t0 = time.perf_counter()
            for i, t in enumerate(gen):
                self.decode([t], depth + i)
            out["decode_tps"] = n_gen / (time.perf_counter() - t0)
        return out


def ours(binary, model, threads, n_prompt, n_gen, depth):
    cmd = [binary, "bench", "-m", model, "-t", str(threads), "-p", str(n_prompt), "-n", str(n_gen), "-d", str(depth),
           "-r", "1", "--json"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed: {res.stderr.strip()}")
    return json.loads(res.stdout)


def summary(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-d", "--depth", type=int, default=0)
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "tokensieve"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    n_ctx = max(a.n_prompt, a.depth + a.n_gen) + 16
    ref = LlamaCpp(a.model, a.threads, n_ctx)
    rng = random.Random(a.seed)
    ref.bench(min(a.n_prompt, 32), 4, 0, rng)  # warm-up: page the weights in
    rows = {"prefill_tps": ([], []), "decode_tps": ([], [])}
    machine_bw = None
    for rep in range(a.reps):
        o = ours(a.bin, a.model, a.threads, a.n_prompt, a.n_gen, a.depth)
        r = ref.bench(a.n_prompt, a.n_gen, a.depth, rng)
        machine_bw = o["machine_bandwidth_gbs"]
        for key in rows:
            if key in r:
                rows[key][0].append(o[key])
                rows[key][1].append(r[key])
        print(f"rep {rep + 1}/{a.reps}: " + ", ".join(f"{k} ours {rows[k][0][-1]:.1f} llama.cpp {rows[k][1][-1]:.1f}"
                                                        for k in rows if rows[k][0]), file=sys.stderr)
    result = {"model": os.path.basename(a.model), "threads": a.threads, "n_prompt": a.n_prompt, "n_gen": a.n_gen,
              "depth": a.depth, "reps": a.reps, "machine_bandwidth_gbs": machine_bw, "llama_cpp_python": ref.L.__version__}
    for key, (mine, theirs) in rows.items():
        if mine:
            result[key] = {"ours": summary(mine), "llama_cpp": summary(theirs),
                           "ratio": summary([x / y for x, y in zip(mine, theirs)])}
    if a.json:
        print(json.dumps(result))
        return
    print(f"| test | ours t/s (median) | llama.cpp t/s (median) | ratio min | ratio median | ratio max |")
    print("|---|---|---|---|---|---|")
    names = {"prefill_tps": f"pp{a.n_prompt}", "decode_tps": f"tg{a.n_gen} @ d{a.depth}"}
    for key in rows:
        if key in result:
            r = result[key]
            print(f"| {names[key]} | {r['ours']['median']:.1f} | {r['llama_cpp']['median']:.1f} | "
                  f"{r['ratio']['min']:.2f} | {r['ratio']['median']:.2f} | {r['ratio']['max']:.2f} |")


if __name__ == "__main__":
    main()
