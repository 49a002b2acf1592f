#!/usr/bin/env python3
"""Side-by-side throughput: tokensieve vs llama.cpp (through llama-cpp-python) on the same GGUF and
threads, over a matrix of models x threads x tests, repetitions interleaved in one run.

    python3 bench/compare_llamacpp.py                       # both project models, -t 1 and 2, 3 reps
    python3 bench/compare_llamacpp.py -m models/X.gguf -t 2 --tests pp512,tg128 -r 5
    python3 bench/compare_llamacpp.py --write BENCHMARKS.md # replace the tables between the markers
    python3 bench/compare_llamacpp.py --contention ...      # quiet and one core busy (bench/contention.sh)

Tests: ppN (prefill N tokens), tgN (decode N tokens after an empty cache), tgN@dD (decode N tokens
after a D-token context). Prints one markdown table per model with tokens/s (median over
repetitions) and the ratio ours / llama.cpp (min / median / max), the instruction set our engine
used (TS_SIMD caps it), the load average before and after, and for decode at depth 0 the fraction of
the read bandwidth our `bench` measured in the same run. llama.cpp runs in this process through
llama-cpp-python's low-level API (llama_decode on batches of 512) with its default F16 KV cache, as
our engine uses. Measure only on a quiet machine: nothing else running.
"""
import argparse
import ctypes
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "Qwen2.5-Coder-0.5B-Instruct.gguf"]
BEGIN, END = "<!-- compare_llamacpp:begin -->", "<!-- compare_llamacpp:end -->"
CONTENTION_BEGIN, CONTENTION_END = "<!-- contention:begin -->", "<!-- contention:end -->"


def _make_quiet_log():
    import llama_cpp as L

    return L.llama_log_callback(lambda level, text, user_data: None)


_quiet_log = None


class LlamaCpp:
    def __init__(self, model, threads, n_ctx):
        import llama_cpp as L

        self.L = L
        global _quiet_log
        _quiet_log = _quiet_log or _make_quiet_log()
        L.llama_log_set(_quiet_log, ctypes.c_void_p())  # model-load chatter would bury the progress lines
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

    def close(self):
        self.L.llama_batch_free(self.batch)
        self.L.llama_free(self.ctx)
        self.L.llama_model_free(self.model)

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

    def run(self, test, rng):
        """Tokens/s of one test (see parse_test)."""
        kind, n, depth = test
        self.clear()
        tokens = lambda k: [rng.randrange(100, self.n_vocab) for _ in range(k)]
        if kind == "pp":
            prompt = tokens(n)
            t0 = time.perf_counter()
            self.decode(prompt, 0)
            return n / (time.perf_counter() - t0)
        if depth:
            self.decode(tokens(depth), 0)
        gen = tokens(n)
        t0 = time.perf_counter()
        for i, t in enumerate(gen):
            self.decode([t], depth + i)
        return n / (time.perf_counter() - t0)


def parse_test(name):
    m = re.fullmatch(r"(pp|tg)(\d+)(?:@d(\d+))?", name)
    if not m or (m.group(1) == "pp" and m.group(3)):
        sys.exit(f"error: bad test '{name}' (ppN, tgN or tgN@dD)")
    return m.group(1), int(m.group(2)), int(m.group(3) or 0)


def test_name(test):
    kind, n, depth = test
    return f"pp{n}" if kind == "pp" else f"tg{n} @ d{depth}"


def ours(binary, model, threads, test):
    kind, n, depth = test
    p, g = (n, 0) if kind == "pp" else (0, n)
    cmd = [binary, "bench", "-m", model, "-t", str(threads), "-p", str(p), "-n", str(g), "-d", str(depth),
           "-r", "1", "--json"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed: {res.stderr.strip()}")
    j = json.loads(res.stdout)
    j["tps"] = j["prefill_tps"] if kind == "pp" else j["decode_tps"]
    return j


class BusyCores:
    """`n` other processes, each keeping one core busy while the block runs (as another program on a
    shared machine would); each ends by itself when this process is gone."""

    LOOP = ("import os, sys\nparent = int(sys.argv[1])\n"
            "while os.getppid() == parent:\n    sum(range(100000))\n")

    def __init__(self, n):
        self.n, self.procs = n, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", self.LOOP, str(os.getpid())]) for _ in range(self.n)]
        if self.procs:
            time.sleep(0.2)  # running before the measurement starts
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def summary(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def measure(model, threads_list, tests, reps, binary, seed, busy_list=(0,)):
    """One model's rows: for each thread count, every test interleaved with llama.cpp, reps times,
    each repetition once per number of busy cores in busy_list."""
    rows = []
    for threads in threads_list:
        n_ctx = max(t[1] + t[2] for t in tests) + 16
        ref = LlamaCpp(model, threads, n_ctx)
        rng = random.Random(seed)
        ref.run(("pp", 32, 0), rng)  # warm-up: page the weights in
        for test in tests:
            runs = {busy: {"mine": [], "theirs": [], "fractions": []} for busy in busy_list}
            for rep in range(reps):
                for busy in busy_list:
                    with BusyCores(busy):
                        o = ours(binary, model, threads, test)
                        r = ref.run(test, rng)
                    run = runs[busy]
                    run["mine"].append(o["tps"])
                    run["theirs"].append(r)
                    if test[0] == "tg":
                        run["fractions"].append(o["decode_bandwidth_fraction"])
                    print(f"{os.path.basename(model)} -t {threads} {test_name(test)} busy {busy} rep {rep + 1}/{reps}: "
                          f"ours {o['tps']:.1f} llama.cpp {r:.1f} t/s", file=sys.stderr)
            for busy, run in runs.items():
                rows.append({"threads": threads, "test": test_name(test), "busy_cores": busy, "simd": o["simd"],
                             "ours": summary(run["mine"]), "llama_cpp": summary(run["theirs"]),
                             "ratio": summary([x / y for x, y in zip(run["mine"], run["theirs"])]),
                             "bandwidth_fraction": statistics.median(run["fractions"]) if run["fractions"] else None,
                             "machine_bandwidth_gbs": o["machine_bandwidth_gbs"]})
        ref.close()
    return rows


def table(model, rows, load_before, load_after, version):
    out = [f"### {os.path.basename(model)}", "",
           f"llama-cpp-python {version}; load average {load_before:.2f} before, {load_after:.2f} after; "
           f"ratio = ours / llama.cpp over the repetitions (min / median / max).", "",
           "| threads | simd | test | ours t/s | llama.cpp t/s | ratio min | ratio median | ratio max | "
           "decode bandwidth (of measured) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bw = (f"{100 * r['bandwidth_fraction']:.0f}% of {r['machine_bandwidth_gbs']:.1f} GB/s"
              if r["bandwidth_fraction"] is not None else "")
        out.append(f"| {r['threads']} | {r['simd']} | {r['test']} | {r['ours']['median']:.1f} | "
                   f"{r['llama_cpp']['median']:.1f} | {r['ratio']['min']:.2f} | {r['ratio']['median']:.2f} | "
                   f"{r['ratio']['max']:.2f} | {bw} |")
    return "\n".join(out)


def contention_table(model, rows, load_before, load_after, version):
    """Quiet beside one core busy, per test and thread count, and the figure that matters on a shared
    machine: what a second thread gives when only one core is free."""
    at = {(r["test"], r["threads"], r["busy_cores"]): r for r in rows}
    out = [f"### {os.path.basename(model)}", "",
           f"llama-cpp-python {version}; {rows[0]['simd']}; load average {load_before:.2f} before, "
           f"{load_after:.2f} after (the busy process counts 1); tokens/s, medians over the repetitions.", "",
           "| test | threads | quiet: ours | quiet: llama.cpp | one core busy: ours | one core busy: llama.cpp | "
           "busy / quiet: ours | busy / quiet: llama.cpp |",
           "|---|---|---|---|---|---|---|---|"]
    tests = list(dict.fromkeys(r["test"] for r in rows))
    threads = sorted({r["threads"] for r in rows})
    for test in tests:
        for t in threads:
            q, b = at[(test, t, 0)], at[(test, t, 1)]
            out.append(f"| {test} | {t} | {q['ours']['median']:.1f} | {q['llama_cpp']['median']:.1f} | "
                       f"{b['ours']['median']:.1f} | {b['llama_cpp']['median']:.1f} | "
                       f"{b['ours']['median'] / q['ours']['median']:.2f} | "
                       f"{b['llama_cpp']['median'] / q['llama_cpp']['median']:.2f} |")
    if 1 in threads and 2 in threads:
        out += ["", "With one core busy, `-t 2` ÷ `-t 1` (target ≥ 0.95 for ours):", ""]
        for test in tests:
            one, two = at[(test, 1, 1)], at[(test, 2, 1)]
            out.append(f"- {test}: ours **{two['ours']['median'] / one['ours']['median']:.2f}**, "
                       f"llama.cpp {two['llama_cpp']['median'] / one['llama_cpp']['median']:.2f}")
    return "\n".join(out)


def write_tables(path, text, begin=BEGIN, end=END):
    doc = open(path).read()
    if begin not in doc or end not in doc:
        sys.exit(f"error: {path} has no {begin} ... {end} markers")
    head, rest = doc.split(begin, 1)
    tail = rest.split(end, 1)[1]
    open(path, "w").write(f"{head}{begin}\n{text}\n{end}{tail}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", action="append", help="GGUF file (repeatable; default: both project models)")
    ap.add_argument("-t", "--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    ap.add_argument("--tests", default="pp512,tg128,tg64@d4096", help="default pp512,tg128,tg64@d4096")
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "tokensieve"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write every figure to this JSON file")
    ap.add_argument("--write", help="replace the tables between the markers of this markdown file")
    ap.add_argument("--busy", type=int, default=0, help="keep this many cores busy with other processes")
    ap.add_argument("--contention", action="store_true",
                    help="each repetition quiet and with one core busy; one table of both (bench/contention.sh)")
    a = ap.parse_args()
    if a.busy < 0 or (a.busy and a.contention):
        sys.exit("error: --busy takes a count of cores, and not with --contention")
    busy_list = (0, 1) if a.contention else (a.busy,)
    make_table = contention_table if a.contention else table
    markers = (CONTENTION_BEGIN, CONTENTION_END) if a.contention else (BEGIN, END)

    models = a.model or [os.path.join(ROOT, "models", m) for m in DEFAULT_MODELS]
    for m in models:
        if not os.path.isfile(m):
            sys.exit(f"error: no model file {m} (tools/fetch_model.sh fetches the project's models)")
    try:
        threads_list = [int(t) for t in a.threads.split(",")]
    except ValueError:
        sys.exit(f"error: bad --threads '{a.threads}'")
    tests = [parse_test(t) for t in a.tests.split(",")]
    import llama_cpp

    tables, results = [], []
    for model in models:
        load_before = os.getloadavg()[0]
        rows = measure(model, threads_list, tests, a.reps, a.bin, a.seed, busy_list)
        load_after = os.getloadavg()[0]
        tables.append(make_table(model, rows, load_before, load_after, llama_cpp.__version__))
        results.append({"model": os.path.basename(model), "load_before": load_before, "load_after": load_after,
                        "llama_cpp_python": llama_cpp.__version__, "rows": rows})
    text = "\n\n".join(tables)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    if a.write:
        write_tables(a.write, text, *markers)


if __name__ == "__main__":
    main()
