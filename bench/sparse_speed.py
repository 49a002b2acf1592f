#!/usr/bin/env python3
"""The sparse-speed matrix: every policy family against dense in the same engine (tokensieve bench).

At several context lengths, thread counts and SIMD levels: prefill and decode tokens/s, the KV bytes
held and peak RSS.

    python3 bench/sparse_speed.py                           # both models, every family, 1 and 2 threads
    python3 bench/sparse_speed.py --models smollm2 --families quest,h2o --lengths 2048 -t 2 --dry-run
    python3 bench/sparse_speed.py --simd native,avx2 --modes decode --write BENCHMARKS.md
    python3 bench/sparse_speed.py --report-only --write BENCHMARKS.md  # tables from the cache, nothing run

A cell is one (model, family, mode, length, threads, machine kind, SIMD level); the machine kind is
the level the engine picks here on its own (an AVX2 figure from an AVX-512 machine is not one from
an AVX2-only machine). `tokensieve bench --vs-dense`
measures the family's policies and dense interleaved in one process (medians over the repetitions);
a prefill cell is ppL, a decode cell decodes --n-gen tokens after an L-token context. Peak RSS per
configuration needs a process of its own, so with --rss each cell also runs `bench -r 1` once with
the policies and once dense. Every finished cell appends one JSON line to --cache (the raw data);
a rerun skips the cells already there unless --redo, so an interrupted run resumes. The tables (one
per model, machine kind and SIMD level) are built from the cache alone and go between the markers
of --write (appended at the end if missing). Measure only on a quiet machine: nothing else running.
"""
import argparse
import collections
import datetime
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- sparse_speed:begin -->", "<!-- sparse_speed:end -->"
# key: (file in models/, max context, the name its files in profiles/ and predictors/ start with)
MODELS = {"smollm2": ("SmolLM2-135M-Instruct.Q4_1.gguf", 8192, "smollm2-135m"),
          "qwen": ("Qwen2.5-Coder-0.5B-Instruct.gguf", 32768, "qwen2.5-coder-0.5b")}
SIMD_LEVELS = ("native", "avx2", "avx512", "scalar")  # native: TS_SIMD unset (the engine's best)
MODES = ("prefill", "decode")

# models: MODELS keys, None = any. {files} in a spec: the model's profile/predictor name (MODELS);
# {root}: the repository, filled in at run time. A family naming such a file runs on the models its
# tuple lists (PROFILED: every MODELS key, each has its profiles in profiles/ and its TokenButler
# predictors in predictors/); the files themselves are not checked when planning, so a model
# added to one of these tuples needs its files first, else its cells fail (recorded as ok=false).
Family = collections.namedtuple("Family", "key specs modes models")
BUTLER = "tokenbutler:keep=0.5,predictor={root}/predictors/{files}-instruct.butler.safetensors"
BUTLER_2K = "tokenbutler:keep=0.5,predictor={root}/predictors/{files}-instruct.butler-2k.safetensors"
PROFILED = ("smollm2", "qwen")
KIVI2_Q = "kvquant:bits=2,group=128,mode=kivi,prefill=quantized"  # the KVSink grids' cache
FAMILIES = [
    Family("orthorank", ["orthorank:profile={root}/profiles/{files}-orthorank-shortened-20.json"],
           ("prefill",), PROFILED),
    Family("orthorank-sleb", ["orthorank:profile={root}/profiles/{files}-orthorank-sleb-20.json"],
           ("prefill",), PROFILED),
    Family("sleb", ["sleb:profile={root}/profiles/{files}-sleb-20.json"], ("prefill",), PROFILED),
    Family("shortened", ["shortened:profile={root}/profiles/{files}-shortened-20.json"], ("prefill",), PROFILED),
    Family("tokenbutler", [BUTLER], ("decode",), PROFILED),
    Family("tokenbutler-shared", [BUTLER + ",shared=1,keys=i8"], ("decode",), PROFILED),
    Family("tokenbutler-2k", [BUTLER_2K], ("decode",), PROFILED),
    Family("quest", ["quest:keep=0.5"], ("decode",), None),
    Family("quest-shared", ["quest:keep=0.5,shared=1"], ("decode",), None),
    Family("quest-i8", ["quest:keep=0.5,bounds=i8"], ("decode",), None),
    Family("quest-shared-i8", ["quest:keep=0.5,shared=1,bounds=i8"], ("decode",), None),
    Family("oracle", ["oracle:keep=0.5"], ("decode",), None),
    Family("h2o", ["h2o:keep=0.5"], ("decode",), None),
    Family("snapkv", ["snapkv:keep=0.5"], ("decode",), None),
    Family("h2o-shared", ["h2o:keep=0.5,shared=1"], ("decode",), None),
    Family("snapkv-shared", ["snapkv:keep=0.5,shared=1"], ("decode",), None),
    Family("streaming", ["streaming:keep=0.5"], ("decode",), None),
    *[Family(f"int{bits}-g{group}", [f"kvquant:bits={bits},group={group}"], ("decode",), None)
      for bits in (4, 2) for group in (32, 64, 128)],
    Family("kivi4", ["kvquant:bits=4,group=32,mode=kivi,residual=32"], ("decode",), None),
    Family("kivi2", ["kvquant:bits=2,group=32,mode=kivi,residual=32"], ("decode",), None),
    Family("kvsink4", ["kvquant:bits=4,group=32", "pfn:n=4"], ("decode",), None),  # see FOOTNOTE
    Family("kivi2-g128", [KIVI2_Q], ("decode",), None),
    Family("kivi2-g128-pfn5", [KIVI2_Q, "pfn:n=5"], ("decode",), None),
    Family("kivi2-g128-kvsink5", [KIVI2_Q, "kvsink:k=5,profile={root}/profiles/{files}-kvsink.json"], ("decode",),
           PROFILED),
    Family("tokenfilter", ["tokenfilter:ratio=0.3"], MODES, None),
    Family("tokenfilter-random", ["tokenfilter:ratio=0.3,select=random"], MODES, None),
    Family("tokenfilter-uniform", ["tokenfilter:ratio=0.3,placement=uniform"], MODES, None),
    Family("attnremove", ["attnremove:ratio=0.3"], MODES, None),
    Family("zipvl", ["zipvl:tau=0.975"], MODES, None),
    # ZipVL's matched baselines in docs/results/grids/zipvl-*.json
    Family("fixedratio-0.73", ["fixedratio:keep=0.73"], MODES, ("smollm2",)),
    Family("fixedratio-0.75", ["fixedratio:keep=0.75"], MODES, ("qwen",)),
]
FOOTNOTE = ("kvsink4 is 4-bit kvquant with the first 4 positions at full precision (`pfn:n=4`), a stand-in "
            "for KVSink; the kivi2-g128-kvsink5 family runs KVSink proper (`kvsink:k=5`) with the model's "
            "committed profile (profiles/…-kvsink.json, from `tokensieve calibrate kvsink`), on the KVSink "
            "grids' INT2 KIVI cache.")
KEY_FIELDS = ("model_file", "family", "mode", "length", "threads", "machine", "simd", "reps", "n_gen")
FIGURES = ("prefill_tps", "decode_tps", "prefill_cpu_tps", "decode_cpu_tps", "kv_bytes_per_token",
           "kv_held_fraction", "kv_held_bytes_per_token", "decode_bytes_per_token", "decode_bandwidth_gbs",
           "decode_bandwidth_fraction", "kv_resident_bytes")


def csv(text, convert=str, allowed=None):
    items = [convert(x) for x in text.split(",") if x]
    bad = [x for x in items if allowed is not None and x not in allowed]
    if bad or not items:
        sys.exit(f"error: bad list '{text}'" + (f" (choose from {', '.join(allowed)})" if allowed else ""))
    return items


def machine_simd():
    """The instruction set the engine picks here without TS_SIMD (the flags of src/core/cpu_features.cpp):
    a figure belongs to the machine's kind as well as to the level it ran."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(next(line for line in f if line.startswith("flags")).split(":", 1)[1].split())
    except (OSError, StopIteration):
        return "unknown"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16", "avx512vbmi"} <= flags:
        return "avx512"
    return "avx2" if {"avx2", "fma"} <= flags else "scalar"


def model_key(path):
    """The MODELS key of a GGUF path (by file name), None for another model."""
    return next((k for k, (f, _, _) in MODELS.items() if f == os.path.basename(path)), None)


def plan(a):
    """The cells to measure, one model/length's together so an interruption loses little."""
    families = [f for f in FAMILIES if f.key in a.families]
    for name in a.models:
        path = os.path.join(ROOT, "models", MODELS[name][0]) if name in MODELS else name
        key = model_key(path)
        max_ctx = MODELS[key][1] if key else None  # another model: every length asked for
        for length in [n for n in a.lengths if max_ctx is None or n <= max_ctx]:
            for mode in a.modes:
                for threads in a.threads:
                    for simd in a.simd:
                        for f in families:
                            if mode in f.modes and (f.models is None or key in f.models):
                                specs = [x.replace("{files}", MODELS[key][2]) if key else x for x in f.specs]
                                yield {"model": path, "model_file": os.path.basename(path), "family": f.key,
                                       "specs": specs, "mode": mode, "length": length, "threads": threads,
                                       "machine": a.machine, "simd": simd, "reps": a.reps, "n_gen": a.n_gen if mode == "decode" else 0}


def batched(cells, together):
    """Cells that differ only in family, at most `together` per batch: one process, one dense."""
    groups = collections.defaultdict(list)
    for c in cells:
        groups[tuple(c[k] for k in KEY_FIELDS if k != "family") + (c["model"],)].append(c)
    return [g[i:i + together] for g in groups.values() for i in range(0, len(g), together)]


def bench_cmd(binary, cell, configs, reps, n_gen, vs_dense):
    """`tokensieve bench` of one or more configurations (each a list of policy specs; [] = dense alone)."""
    p, n, d = (cell["length"], 0, 0) if cell["mode"] == "prefill" else (0, n_gen, cell["length"])
    policies = [x for specs in configs if specs for x in ("--config", ";".join(s.format(root=ROOT) for s in specs))]
    return ([binary, "bench", "-m", cell["model"], "-t", str(cell["threads"]), *policies]
            + (["--vs-dense"] if vs_dense else []) + ["--json", "-r", str(reps), "-p", str(p), "-n", str(n),
                                                      "-d", str(d)])


def shown(cmd, simd):
    return ("" if simd == "native" else f"TS_SIMD={simd} ") + shlex.join(cmd)


def run_engine(cmd, simd):
    """The engine's JSON, or (None, its last stderr line)."""
    env = dict(os.environ)
    env.pop("TS_SIMD", None)
    if simd != "native":
        env["TS_SIMD"] = simd
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        lines = [x.strip() for x in res.stderr.replace("\r", "\n").splitlines() if x.strip()]
        return None, lines[-1] if lines else f"exit status {res.returncode}"
    return json.loads(res.stdout), None


def read_cache(path):
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    for r in records:  # records from before the machine field: all from AVX2-only machines, run natively
        r.setdefault("machine", r.get("simd_used", "avx2"))
    return records


def measure(cells, a, commit, dense_rss):
    """The cache records of cells that differ only in family, measured in one run beside one dense
    (each family's and dense's fills and repetitions interleaved); dense_rss memoises the dense
    process's peak RSS, the same for every family."""
    c0 = cells[0]
    command = "python3 bench/sparse_speed.py " + shlex.join(sys.argv[1:])
    base = {"commit": commit, "command": command, "together": [c["family"] for c in cells],
            "load_before": os.getloadavg()[0]}
    j, err = run_engine(bench_cmd(a.bin, c0, [c["specs"] for c in cells], a.reps, a.n_gen, True), c0["simd"])
    base |= {"load_after": os.getloadavg()[0],
             "utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    records = []
    for i, cell in enumerate(cells):
        record = {k: cell[k] for k in KEY_FIELDS} | {"specs": cell["specs"]} | base
        if err:
            records.append(record | {"ok": False, "error": err})
            continue
        ji = j["configs"][i]
        record |= {"ok": True, "simd_used": j["simd"], "machine_bandwidth_gbs": j["machine_bandwidth_gbs"],
                   "peak_rss_run_bytes": j["peak_rss_bytes"], "speedup_vs_dense": ji["speedup_vs_dense"],
                   "policy": {k: ji[k] for k in FIGURES}, "dense": {k: j["dense"][k] for k in FIGURES}}
        if a.rss:
            rss_key = (cell["model_file"], cell["mode"], cell["length"], cell["threads"], cell["machine"],
                       cell["simd"])
            policy_j, rss_err = run_engine(bench_cmd(a.bin, cell, [cell["specs"]], 1, 4, False), cell["simd"])
            if policy_j and rss_key not in dense_rss:
                dense_j, rss_err = run_engine(bench_cmd(a.bin, cell, [], 1, 4, False), cell["simd"])
                if dense_j:
                    dense_rss[rss_key] = dense_j["peak_rss_bytes"]
            if rss_err:
                record["rss_error"] = rss_err
            else:
                record |= {"rss_policy_bytes": policy_j["peak_rss_bytes"], "rss_dense_bytes": dense_rss[rss_key]}
        records.append(record)
    return records


def row(r):
    spec = " + ".join(f"`{s.replace('{root}/', '')}`" for s in r["specs"])
    test = f"pp{r['length']}" if r["mode"] == "prefill" else f"tg{r['n_gen']} @ d{r['length']}"
    head = f"| {r['family']} | {spec} | {r['threads']} | {test} |"
    if not r["ok"]:
        return head + f" failed: {r['error'][:100]} | | | | | | | | {r['commit']} |"
    tps = "prefill_tps" if r["mode"] == "prefill" else "decode_tps"
    s = r["speedup_vs_dense"][r["mode"]], r["speedup_vs_dense"][r["mode"] + "_cpu"]
    # The engine measures the bytes held only after a decode run.
    held = (f"{r['policy']['kv_held_bytes_per_token']:.0f} vs {r['dense']['kv_held_bytes_per_token']:.0f}"
            if r["mode"] == "decode" else "–")
    rss = (f"{r['rss_policy_bytes'] / 2**20:.0f} / {r['rss_dense_bytes'] / 2**20:.0f}"
           if "rss_policy_bytes" in r else "–")
    resident = (f"{r['policy']['kv_resident_bytes'] / 2**20:.0f} / {r['dense']['kv_resident_bytes'] / 2**20:.0f}"
                if "kv_resident_bytes" in r["policy"] else "–")
    return (head + f" {r['policy'][tps]:.1f} | {r['dense'][tps]:.1f} | {s[0]:.2f}× | {s[1]:.2f}× | {held} | "
            f"{resident} | {rss} | {r['load_before']:.2f}–{r['load_after']:.2f} | {r['commit']} |")


def overview(latest):
    """Per machine kind, the wall-time speed-ups at a glance: a row per family, a column per (model,
    test, threads, SIMD level) measured on that kind of machine."""
    out = []
    order = {f.key: i for i, f in enumerate(FAMILIES)}
    by_machine = collections.defaultdict(list)
    for r in latest.values():
        if r["ok"]:
            by_machine[r["machine"]].append(r)
    for machine, rows in sorted(by_machine.items()):
        def column(r):
            model = "SmolLM2" if r["model_file"].startswith("SmolLM2") else "Qwen 0.5B" if r["model_file"].startswith(
                "Qwen") else r["model_file"]
            test = f"pp{r['length'] // 1024}K" if r["mode"] == "prefill" else f"d{r['length'] // 1024}K"
            simd = "" if r["simd"] == "native" else f" {r['simd']}"
            return (r["model_file"], MODES.index(r["mode"]), r["length"], -r["threads"], r["simd"]), \
                f"{model} {test} {r['threads']}t{simd}"
        columns = sorted({column(r) for r in rows})
        cells = {(r["family"], column(r)): f"{r['speedup_vs_dense'][r['mode']]:.2f}" for r in rows}
        families = sorted({r["family"] for r in rows}, key=lambda f: order.get(f, 99))
        kind = {"avx512": "AVX-512 machine", "avx2": "AVX2-only machine"}.get(machine, f"{machine} machine")
        out += ["", f"#### {kind}: speed-up over dense (wall time; d = decode at that depth, pp = prefill)", "",
                "| family | " + " | ".join(name for _, name in columns) + " |",
                "|---|" + "---|" * len(columns),
                *[f"| {f} | " + " | ".join(cells.get((f, c), "") for c in columns) + " |" for f in families]]
    return out


def report(records):
    """The markdown: the overview per machine kind, then one table per (model, machine kind, SIMD
    level), from the cache's records."""
    latest = {}
    for r in records:  # a successful record beats a failed one; a later one an earlier one
        key = tuple(r[k] for k in KEY_FIELDS)
        if r["ok"] or not latest.get(key, {}).get("ok"):
            latest[key] = r
    if not latest:
        return "No measurements yet."
    out = [*overview(latest), "", *[f"`{c}`" for c in sorted({r["command"] for r in latest.values()})], "",
           "t/s: medians over the repetitions, policies and dense interleaved in one process (up to "
           "--together families beside one dense); speed-up (CPU time) counts the process's CPU time, not "
           "its waits for a core. KV cache resident: the cache's pages in memory after the run (mincore), "
           "pages of evicted rows are handed back. Peak RSS: separate `bench -r 1` processes. " + FOOTNOTE]
    order = {f.key: i for i, f in enumerate(FAMILIES)}
    tables = collections.defaultdict(list)
    for r in latest.values():
        tables[(r["model_file"], r["machine"], r["simd"])].append(r)
    for (model, machine, asked), rows in sorted(tables.items()):
        rows.sort(key=lambda r: (r["threads"], MODES.index(r["mode"]), r["length"], order.get(r["family"], 99)))
        used = ", ".join(sorted({r["simd_used"] for r in rows if r["ok"]})) or "?"  # what the engine reported
        bandwidth = [r["machine_bandwidth_gbs"] for r in rows if r["ok"]]
        kind = {"avx512": "AVX-512 machine", "avx2": "AVX2-only machine"}.get(machine, f"{machine} machine")
        out += ["", f"### {model}, {kind}, simd {used} (TS_SIMD {asked})", "",
                "Measured read bandwidth "
                + (f"{min(bandwidth):.1f}–{max(bandwidth):.1f} GB/s" if bandwidth else "–")
                + f"; commits {', '.join(sorted({r['commit'] for r in rows}))}.", "",
                "| family | policy spec | threads | test | policy t/s | dense t/s | speed-up (wall) | "
                "speed-up (CPU time) | KV held (bytes/token, policy) vs dense | KV cache resident policy / dense "
                "(MiB) | peak RSS policy / dense (MiB) | load before–after | commit |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
                *map(row, rows)]
    return "\n".join(out)


def write_tables(path, text):
    doc = open(path).read() if os.path.isfile(path) else ""
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
    else:
        head, tail = doc.rstrip("\n") + "\n\n", "\n"
    open(path, "w").write(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="smollm2,qwen", help=f"keys ({', '.join(MODELS)}) or GGUF paths")
    ap.add_argument("--families", default=",".join(f.key for f in FAMILIES), help="default: all")
    ap.add_argument("--modes", default="prefill,decode")
    ap.add_argument("--lengths", default="2048,8192,16384,32768", help="context lengths (capped per model)")
    ap.add_argument("-t", "--threads", default="1,2")
    ap.add_argument("--simd", default="native", help=f"TS_SIMD levels, comma-separated ({', '.join(SIMD_LEVELS)})")
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--n-gen", type=int, default=32, help="decode tokens per decode cell (default 32)")
    ap.add_argument("--rss", action=argparse.BooleanOptionalAction, default=True,
                    help="peak RSS of policy and dense, each in a process of its own (default on)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "tokensieve"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "bench", "sparse_speed.jsonl"))
    ap.add_argument("--together", type=int, default=8,
                    help="most families measured in one run beside one dense (default 8; each holds a KV cache)")
    ap.add_argument("--redo", action="store_true", help="measure cells already in the cache again")
    ap.add_argument("--dry-run", action="store_true", help="print the engine commands only")
    ap.add_argument("--report-only", action="store_true", help="tables from the cache, nothing run")
    ap.add_argument("--write", help="replace the tables between the markers of this markdown file")
    a = ap.parse_args()
    a.models = csv(a.models)
    a.families = csv(a.families, allowed=[f.key for f in FAMILIES])
    a.modes = csv(a.modes, allowed=MODES)
    a.simd = csv(a.simd, allowed=SIMD_LEVELS)
    a.machine = machine_simd()
    if a.together < 1:
        sys.exit("error: --together takes a positive number of families")
    try:
        a.lengths, a.threads = csv(a.lengths, int), csv(a.threads, int)
    except ValueError:
        sys.exit("error: --lengths and --threads take integers")

    records = read_cache(a.cache)
    if not a.report_only:
        done = set() if a.redo else {tuple(r[k] for k in KEY_FIELDS) for r in records if r["ok"]}
        cells = [c for c in plan(a) if tuple(c[k] for k in KEY_FIELDS) not in done]
        batches = batched(cells, a.together)
        if a.dry_run:
            for batch in batches:
                c = batch[0]
                print(shown(bench_cmd(a.bin, c, [x["specs"] for x in batch], a.reps, a.n_gen, True), c["simd"]))
                if a.rss:  # each family's and dense's peak RSS in processes of their own
                    for x in batch + [c | {"specs": []}]:
                        print(shown(bench_cmd(a.bin, x, [x["specs"]] if x["specs"] else [], 1, 4, False), c["simd"]))
            return
        for path in {c["model"] for c in cells} | ({a.bin} if cells else set()):
            if not os.path.isfile(path):
                sys.exit(f"error: no file {path} (tools/fetch_model.sh fetches the models; build the engine)")
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or "unknown"
        dense_rss = {(r["model_file"], r["mode"], r["length"], r["threads"], r["machine"], r["simd"]):
                     r["rss_dense_bytes"]
                     for r in records if r["ok"] and "rss_dense_bytes" in r}
        for i, batch in enumerate(batches, 1):
            rs = measure(batch, a, commit, dense_rss)
            if len(batch) > 1 and not any(r["ok"] for r in rs):  # one family's failure sinks its batch
                rs = [r for c in batch for r in measure([c], a, commit, dense_rss)]
            with open(a.cache, "a") as f:  # failed cells too: the record says ok=false, a rerun retries them
                f.writelines(json.dumps(r) + "\n" for r in rs)
            records += rs
            for c, r in zip(batch, rs):
                test = f"pp{c['length']}" if c["mode"] == "prefill" else f"tg{c['n_gen']} @ d{c['length']}"
                what = (f"{r['policy'][c['mode'] + '_tps']:.1f} t/s, {r['speedup_vs_dense'][c['mode']]:.2f}× dense"
                        if r["ok"] else f"FAILED: {r['error']}")
                print(f"[{i}/{len(batches)}] {c['model_file']} {c['family']} {test} -t {c['threads']} "
                      f"simd {c['simd']}: {what}", file=sys.stderr, flush=True)
    text = report(records)
    print(text)
    if a.write:
        write_tables(a.write, text)


if __name__ == "__main__":
    main()
