"""tools/plot.py summary: every grid row's perplexity over its grid's dense row against the speed-up of the
same policies in bench/sparse_speed.py's records, the points printed as a table; malformed inputs fail in
one line."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT

HEADER = ("policy,sparsity,setting,task,metric,value,stderr,n,seconds,throughput,speedup,attention_fraction,"
          "ffn_fraction,kv_fraction,baseline,diff,diff_lo,diff_hi,mcnemar_p\n")
TOOL = [sys.executable, str(ROOT / "tools" / "plot.py"), "summary"]


def write_grid(d, stem, model, rows, policies):
    (d / f"{stem}.csv").write_text(HEADER + "".join(rows))
    (d / f"{stem}.json").write_text(json.dumps({"model": model, "threads": 2, "tasks": ["c4"], "policies": [
        {"label": label, "specs": specs} for label, specs in policies]}))


def record(model, family, specs, mode, length, speedup, utc, threads=2, machine="avx512", simd="native", **extra):
    r = {"model_file": model, "family": family, "mode": mode, "length": length, "threads": threads, "simd": simd,
         "specs": specs, "utc": utc, "ok": True, "simd_used": machine if simd == "native" else simd,
         "speedup_vs_dense": {"decode": speedup if mode == "decode" else 0.0,
                              "prefill": speedup if mode == "prefill" else 0.0}}
    if machine is not None:
        r["machine"] = machine
    return r | extra


@pytest.fixture
def inputs(tmp_path):
    grids = tmp_path / "grids"
    grids.mkdir()
    write_grid(grids, "paper-tiny", "models/Tiny-1M.gguf", [
        "dense,0,s,c4,ppl,20,0.1,100,1,100,1,,,,,,,,\n",
        "h2o-0.5,0,s,c4,ppl,21,0.1,100,1,100,1,1,1,1,dense,1,0.5,1.5,\n",        # +5%, interval from the pairing
        "quest-0.5,0,s,c4,ppl,22,0.1,100,1,100,1,1,1,1,h2o-0.5,1,0.5,1.5,\n",    # +10%, paired with H2O: no bars
        "sleb-20,0.2,s,c4,ppl,30,0.1,100,1,100,1,,,,,,,,\n",                     # no bench family
        "tokenbutler-0.5,0,s,c4,ppl,24,0.1,100,1,100,1,1,1,1,,,,,\n",
        "tokenfilter-0.3,0.3,s,c4,ppl,40,0.1,100,1,100,1,,,,,,,,\n",
    ], [("dense", []), ("h2o-0.5", ["h2o:keep=0.5"]), ("quest-0.5", ["quest:keep=0.50"]),
        ("sleb-20", ["sleb:profile=profiles/tiny-sleb.json"]),
        ("tokenbutler-0.5", ["tokenbutler:keep=0.5,predictor=predictors/tiny-2k.safetensors"]),
        ("tokenfilter-0.3", ["tokenfilter:ratio=0.3"])])
    write_grid(grids, "paper-other", "models/Other-2B.gguf", [
        "dense,0,s,c4,ppl,10,0.1,100,1,100,1,,,,,,,,\n",
        "h2o-0.5,0,s,c4,ppl,15,0.1,100,1,100,1,1,1,1,dense,5,4,6,\n",
        "dense,0,s,piqa,acc,0.6,0.01,100,1,100,1,,,,,,,,\n",                    # not the perplexity task: ignored
    ], [("dense", []), ("h2o-0.5", ["h2o:keep=0.5"])])
    tiny, other = "Tiny-1M.gguf", "Other-2B.gguf"
    records = [
        # no machine field: an old record, from the AVX2-only machine
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 8192, 0.9, "2026-01-01T00:00:00+00:00", machine=None),
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 8192, 0.7, "2026-01-01T00:00:00+00:00"),
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 8192, 0.8, "2026-01-02T00:00:00+00:00"),  # the latest: used
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 2048, 1.5, "2026-01-03T00:00:00+00:00"),  # not at depth 8K
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 8192, 3.0, "2026-01-03T00:00:00+00:00", threads=1),
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 8192, 2.5, "2026-01-03T00:00:00+00:00", simd="avx2"),
        record(tiny, "h2o-shared", ["h2o:keep=0.5,shared=1"], "decode", 8192, 4.0, "2026-01-03T00:00:00+00:00"),
        record(tiny, "quest", ["quest:keep=0.5"], "decode", 8192, 1.1, "2026-01-01T00:00:00+00:00", machine="avx2"),
        {"model_file": tiny, "family": "quest", "mode": "decode", "ok": False, "error": "killed"},
        record(tiny, "tokenbutler", ["tokenbutler:keep=0.5,predictor={root}/predictors/tiny.safetensors"], "decode",
               8192, 0.55, "2026-01-01T00:00:00+00:00"),
        record(tiny, "tokenfilter", ["tokenfilter:ratio=0.3"], "decode", 8192, 1.6, "2026-01-01T00:00:00+00:00"),
        record(tiny, "tokenfilter", ["tokenfilter:ratio=0.3"], "prefill", 2048, 1.2, "2026-01-01T00:00:00+00:00"),
        record(other, "h2o", ["h2o:keep=0.5"], "decode", 8192, 9.9, "2026-01-01T00:00:00+00:00"),
    ]
    speed = tmp_path / "speed.jsonl"
    speed.write_text("".join(json.dumps(r) + "\n" for r in records) + "\n")
    return tmp_path, grids, speed


def run(*args):
    return subprocess.run([*TOOL, *map(str, args)], capture_output=True, text=True, timeout=120)


def table(stdout):
    lines = [line for line in stdout.splitlines() if line.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(head, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]]
    return {(r["method"], r["model"]): (r["ΔPPL %"], r["speed-up"], r["mode"], r["machine (SIMD used)"],
                                        r["95% interval (vs dense)"]) for r in rows}


def test_summary_draws_and_prints_the_matched_points(inputs):
    pytest.importorskip("matplotlib")
    tmp, grids, speed = inputs
    png = tmp / "qs.png"
    res = run("--grids", grids, "--speed", speed, "-o", png)
    assert res.returncode == 0, res.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert table(res.stdout) == {
        # AVX-512 before AVX2-only, the latest record, depth 8K; 1-thread and forced-AVX2 records left out
        ("H2O", "Tiny-1M"): ("+5.00", "0.80", "decode d8K", "avx512 (avx512)", "[+2.50, +7.50]"),
        ("Quest", "Tiny-1M"): ("+10.0", "1.10", "decode d8K", "avx2 (avx2)", "–"),  # keep=0.50 is keep=0.5
        ("TokenButler", "Tiny-1M"): ("+20.0", "0.55", "decode d8K", "avx512 (avx512)", "–"),  # predictor path aside
        ("Token Filtering", "Tiny-1M"): ("+100.0", "1.20", "prefill pp2K", "avx512 (avx512)", "–"),
        ("SLEB", "Tiny-1M"): ("+50.0", "–", "no speed figure", "–", "–"),
        ("H2O", "Other-2B"): ("+50.0", "9.90", "decode d8K", "avx512 (avx512)", "[+40.0, +60.0]"),
    }


def test_summary_malformed_inputs_fail_in_one_line(inputs):
    tmp, grids, speed = inputs
    broken = tmp / "broken.jsonl"
    broken.write_text(speed.read_text().splitlines()[0] + "\n{not json\n")
    res = run("--grids", grids, "--speed", broken, "-o", tmp / "x.png")
    assert res.returncode == 1 and res.stderr.strip().count("\n") == 0
    assert res.stderr.startswith(f"error: {broken}:2: invalid JSON")
    partial = tmp / "partial.jsonl"
    partial.write_text('{"model_file": "Tiny-1M.gguf", "ok": true}\n')
    res = run("--grids", grids, "--speed", partial, "-o", tmp / "x.png")
    assert res.returncode == 1 and res.stderr.strip().count("\n") == 0 and f"{partial}:1: record without" in res.stderr
    bad = tmp / "bad"
    bad.mkdir()
    (bad / "g.csv").write_text("policy,value\ndense,1\n")
    res = run("--grids", bad, "--speed", speed, "-o", tmp / "x.png")
    assert res.returncode == 1 and res.stderr.strip().count("\n") == 0 and "not a tokensieve sweep CSV" in res.stderr
    (bad / "g.csv").write_text(HEADER + "dense,0,s,c4,ppl,20,0.1,100,1,100,1,,,,,,,,\n")
    res = run("--grids", bad, "--speed", speed, "-o", tmp / "x.png")
    assert res.returncode == 1 and res.stderr.strip().count("\n") == 0 and "g.json: missing" in res.stderr
    assert not (tmp / "x.png").exists()
