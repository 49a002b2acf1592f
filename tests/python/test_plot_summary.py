"""tools/plot.py summary: every grid row's perplexity over its grid's dense row against the speed-up of the
same policies in bench/sparse_speed.py's records, the points printed as a table; malformed inputs fail in
one line."""
import importlib.util
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
    """A bench/sparse_speed.py record; machine=None: an old one without the machine field (and without
    simd_used unless given)."""
    r = {"model_file": model, "family": family, "mode": mode, "length": length, "threads": threads, "simd": simd,
         "specs": specs, "utc": utc, "ok": True, "simd_used": machine if simd == "native" else simd,
         "speedup_vs_dense": {"decode": speedup if mode == "decode" else 0.0,
                              "prefill": speedup if mode == "prefill" else 0.0}}
    if machine is not None:
        r["machine"] = machine
    r |= extra
    if r["simd_used"] is None:
        del r["simd_used"]
    return r


TINY_ROWS = [
    "dense,0,s,c4,ppl,20,0.1,100,1,100,1,,,,,,,,\n",
    "h2o-0.5,0,s,c4,ppl,21,0.1,100,1,100,1,1,1,1,dense,1,0.5,1.5,\n",        # +5%, interval from the pairing
    "quest-0.5,0,s,c4,ppl,22,0.1,100,1,100,1,1,1,1,h2o-0.5,1,0.5,1.5,\n",    # +10%, paired with H2O: no bars
    "streaming-0.5,0,s,c4,ppl,20.5,0.1,100,1,100,1,,,,,,,,\n",
    "sleb-20,0.2,s,c4,ppl,30,0.1,100,1,100,1,,,,,,,,\n",                     # not measured
    "orthorank-sleb-20,0.2,s,c4,ppl,26,0.1,100,1,100,1,,,,,,,,\n",           # only the other profile measured
    "orthorank-shortened-20,0.2,s,c4,ppl,28,0.1,100,1,100,1,,,,,,,,\n",
    "tokenbutler-2k-0.5,0,s,c4,ppl,24,0.1,100,1,100,1,1,1,1,,,,,\n",          # only the other predictor measured
    "tokenbutler-512-0.5,0,s,c4,ppl,25,0.1,100,1,100,1,1,1,1,,,,,\n",
    "tokenfilter-0.3,0.3,s,c4,ppl,40,0.1,100,1,100,1,,,,,,,,\n",
    "zipvl-0.975,0.3,s,c4,ppl,50,0.1,100,1,100,1,,,,,,,,\n",
    "attnremove-0.3,0.3,s,c4,ppl,60,0.1,100,1,100,1,,,,,,,,\n",
    "mystery-0.5,0,s,c4,ppl,23,0.1,100,1,100,1,,,,,,,,\n",                   # not in the grid's spec
]
TINY_POLICIES = [
    ("dense", []), ("h2o-0.5", ["h2o:keep=0.5"]), ("quest-0.5", ["quest:keep=0.50,"]),  # a trailing comma
    ("streaming-0.5", ["streaming:keep=0.5"]),
    ("sleb-20", ["sleb:profile=profiles/tiny-1m-sleb-20.json"]),
    ("orthorank-sleb-20", ["orthorank:profile=profiles/tiny-1m-orthorank-sleb-20.json"]),
    ("orthorank-shortened-20", ["orthorank:profile=profiles/tiny-1m-orthorank-shortened-20.json"]),
    ("tokenbutler-2k-0.5", ["tokenbutler:keep=0.5,predictor=predictors/tiny-1m-instruct.butler-2k.safetensors"]),
    ("tokenbutler-512-0.5", ["tokenbutler:keep=0.5,predictor=predictors/tiny-1m-instruct.butler.safetensors"]),
    ("tokenfilter-0.3", ["tokenfilter:ratio=0.3"]), ("zipvl-0.975", ["zipvl:tau=0.975"]),
    ("attnremove-0.3", ["attnremove:ratio=0.3"]),
]


@pytest.fixture
def inputs(tmp_path):
    grids = tmp_path / "grids"
    grids.mkdir()
    write_grid(grids, "paper-tiny", "models/Tiny-1M.gguf", TINY_ROWS, TINY_POLICIES)
    write_grid(grids, "paper-other", "models/Other-2B.gguf", [
        "dense,0,s,c4,ppl,10,0.1,100,1,100,1,,,,,,,,\n",
        "h2o-0.5,0,s,c4,ppl,15,0.1,100,1,100,1,1,1,1,dense,5,4,6,\n",
        "dense,0,s,piqa,acc,0.6,0.01,100,1,100,1,,,,,,,,\n",                    # not the perplexity task: ignored
    ], [("dense", []), ("h2o-0.5", ["h2o:keep=0.5"])])
    write_grid(grids, "paper-zeroshot", "models/Tiny-1M.gguf", [
        "dense,0,s,piqa,acc,0.6,0.01,100,1,100,1,,,,,,,,\n",                    # no perplexity rows at all
    ], [("dense", [])])
    write_grid(grids, "paper2-tiny", "models/Tiny-1M.gguf", [                 # read after paper-tiny
        "dense,0,s,c4,ppl,20,0.1,100,1,100,1,,,,,,,,\n",
        "h2o-0.5,0,s,c4,ppl,21.5,0.1,100,1,100,1,,,,,,,,\n",                  # paper-tiny's policies and setting
    ], [("dense", []), ("h2o-0.5", ["h2o:keep=0.5"])])
    tiny, other = "Tiny-1M.gguf", "Other-2B.gguf"
    shortened = "orthorank:profile={root}/profiles/tiny-1m-orthorank-shortened-20.json"
    butler = "tokenbutler:keep=0.5,predictor={root}/predictors/tiny-1m-instruct.butler.safetensors"
    records = [
        # no machine field, simd_used avx2: an old record, from the AVX2-only machine, after the AVX-512 one's
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 8192, 0.9, "2026-01-04T00:00:00+00:00", machine=None,
               simd_used="avx2"),
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 8192, 0.7, "2026-01-01T00:00:00+00:00"),
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 8192, 0.8, "2026-01-02T00:00:00+00:00"),  # the latest: used
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 2048, 1.5, "2026-01-03T00:00:00+00:00"),  # not at depth 8K
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 8192, 3.0, "2026-01-03T00:00:00+00:00", threads=1),
        record(tiny, "h2o", ["h2o:keep=0.5"], "decode", 8192, 2.5, "2026-01-03T00:00:00+00:00", simd="avx2"),
        record(tiny, "h2o-shared", ["h2o:keep=0.5,shared=1"], "decode", 8192, 4.0, "2026-01-03T00:00:00+00:00"),
        # the old AVX2-only record (machine from simd_used) before a later one of another kind of machine
        record(tiny, "quest", ["quest:keep=0.5"], "decode", 8192, 1.1, "2026-01-01T00:00:00+00:00", machine=None,
               simd_used="avx2"),
        record(tiny, "quest", ["quest:keep=0.5"], "decode", 8192, 3.3, "2026-01-05T00:00:00+00:00", machine="scalar"),
        {"model_file": tiny, "family": "quest", "mode": "decode", "ok": False, "error": "killed"},
        # neither machine nor simd_used: from the AVX2-only machine, the SIMD level unknown
        record(tiny, "streaming", ["streaming:keep=0.5"], "decode", 8192, 0.95, "2026-01-01T00:00:00+00:00",
               machine=None),
        record(tiny, "orthorank", [shortened], "prefill", 8192, 1.3, "2026-01-01T00:00:00+00:00"),
        record(tiny, "tokenbutler", [butler], "decode", 8192, 0.55, "2026-01-01T00:00:00+00:00"),
        record(tiny, "tokenfilter", ["tokenfilter:ratio=0.3"], "decode", 8192, 1.6, "2026-01-01T00:00:00+00:00"),
        record(tiny, "tokenfilter", ["tokenfilter:ratio=0.3"], "prefill", 2048, 1.2, "2026-01-01T00:00:00+00:00"),
        # no prefill at 8K: the length nearest by ratio (16K, not the shorter 512; of 4K and 16K, 4K)
        record(tiny, "zipvl", ["zipvl:tau=0.975"], "prefill", 512, 1.3, "2026-01-01T00:00:00+00:00"),
        record(tiny, "zipvl", ["zipvl:tau=0.975"], "prefill", 16384, 1.9, "2026-01-01T00:00:00+00:00"),
        record(tiny, "attnremove", ["attnremove:ratio=0.3"], "prefill", 4096, 1.4, "2026-01-01T00:00:00+00:00"),
        record(tiny, "attnremove", ["attnremove:ratio=0.3"], "prefill", 16384, 1.8, "2026-01-01T00:00:00+00:00"),
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
        # keep=0.50, is keep=0.5; the old record is the AVX2-only machine's, before the unknown kind's
        ("Quest", "Tiny-1M"): ("+10.0", "1.10", "decode d8K", "avx2 (avx2)", "–"),
        ("StreamingLLM", "Tiny-1M"): ("+2.50", "0.95", "decode d8K", "avx2 (?)", "–"),
        # a predictor / profile matches by its kind, not borrowed from another kind
        ("TokenButler (512)", "Tiny-1M"): ("+25.0", "0.55", "decode d8K", "avx512 (avx512)", "–"),
        ("TokenButler (2k)", "Tiny-1M"): ("+20.0", "–", "no speed figure", "–", "–"),
        ("OrthoRank (shortened)", "Tiny-1M"): ("+40.0", "1.30", "prefill pp8K", "avx512 (avx512)", "–"),
        ("OrthoRank (sleb)", "Tiny-1M"): ("+30.0", "–", "no speed figure", "–", "–"),
        ("SLEB", "Tiny-1M"): ("+50.0", "–", "no speed figure", "–", "–"),
        ("Token Filtering", "Tiny-1M"): ("+100.0", "1.20", "prefill pp2K", "avx512 (avx512)", "–"),
        ("ZipVL", "Tiny-1M"): ("+150.0", "1.90", "prefill pp16K", "avx512 (avx512)", "–"),  # 16K nearer than 512
        ("attention removal", "Tiny-1M"): ("+200.0", "1.40", "prefill pp4K", "avx512 (avx512)", "–"),  # tie: 4K
        ("mystery-0.5", "Tiny-1M"): ("+15.0", "–", "no speed figure", "–", "–"),
        ("H2O", "Other-2B"): ("+50.0", "9.90", "decode d8K", "avx512 (avx512)", "[+40.0, +60.0]"),
    }
    notes = res.stderr.splitlines()
    assert "note: paper-zeroshot.csv: no c4 perplexity rows, left out" in notes
    assert ("note: paper-tiny: row 'mystery-0.5' is not in the grid's spec; no policies to match") in notes
    assert ("note: paper2-tiny:h2o-0.5 left out: the same policies and setting as paper-tiny:h2o-0.5, "
            "read first") in notes
    assert len(notes) == 3, res.stderr


def test_summary_takes_the_nearest_length_by_ratio(inputs):
    pytest.importorskip("matplotlib")
    tmp, grids, speed = inputs
    res = run("--grids", grids, "--speed", speed, "-o", tmp / "qs.png", "--length", 1024)
    assert res.returncode == 0, res.stderr
    got = table(res.stdout)
    assert got[("ZipVL", "Tiny-1M")][1:3] == ("1.30", "prefill pp512")  # 512 (×2) before 16K (×16)
    assert got[("attention removal", "Tiny-1M")][1:3] == ("1.40", "prefill pp4K")
    assert got[("Token Filtering", "Tiny-1M")][1:3] == ("1.20", "prefill pp2K")
    assert got[("H2O", "Tiny-1M")][1:3] == ("1.50", "decode d2K")  # 2K (×2) before 8K (×8)


def load_plot():
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("plot_under_test", ROOT / "tools" / "plot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_profiles_and_predictors_match_by_kind_not_by_path():
    plot = load_plot()
    smol, qwen, gemma = "models/SmolLM2-135M-Instruct.Q4_1.gguf", "Qwen2.5-Coder-0.5B-Instruct.gguf", \
        "gemma-3-270m-Q4_K_M.gguf"
    assert plot.file_kind("{root}/profiles/smollm2-135m-orthorank-sleb-20.json", smol) == "orthorank-sleb-20.json"
    assert plot.file_kind("predictors/smollm2-135m-instruct.butler-2k.safetensors", smol) == \
        "instruct.butler-2k.safetensors"
    assert plot.file_kind("profiles/qwen2.5-coder-0.5b-kvsink.json", qwen) == "kvsink.json"
    assert plot.file_kind("profiles/gemma3-270m-sleb-20.json", gemma) == "sleb-20.json"
    assert plot.file_kind("profiles/smollm2-135m-sleb-20.json", qwen) == "smollm2-135m-sleb-20.json"  # not its own

    def key(spec, model):
        return plot.spec_key([spec], model)

    sleb, short = "orthorank:profile={}-orthorank-sleb-20.json", "orthorank:profile={}-orthorank-shortened-20.json"
    # the same kind of profile on another model, another directory: the same policies
    assert key(sleb.format("profiles/smollm2-135m"), smol) == key(sleb.format("/r/profiles/qwen2.5-coder-0.5b"), qwen)
    # two kinds of profile of one model: not
    assert key(sleb.format("profiles/smollm2-135m"), smol) != key(short.format("{root}/profiles/smollm2-135m"), smol)
    butler = "tokenbutler:keep=0.5,predictor=predictors/smollm2-135m-instruct.butler{}.safetensors"
    assert key(butler.format(""), smol) != key(butler.format("-2k"), smol)
    assert key(butler.format("-2k"), smol) == key(butler.format("-2k").replace("=predictors", "={root}/predictors"),
                                                  smol)


def test_parse_spec_drops_empty_items_and_rejects_repeated_keys():
    plot = load_plot()
    assert plot.parse_spec("h2o:keep=0.5,") == ("h2o", {"keep": "0.5"})
    assert plot.parse_spec("sleb:layers=1,3,,5") == ("sleb", {"layers": "1,3,5"})
    assert plot.parse_spec("dense") == ("dense", {})
    for bad in ("h2o:keep=0.5,keep=0.6", "h2o:0.5", "h2o:=0.5", ":keep=0.5"):
        with pytest.raises(ValueError):
            plot.parse_spec(bad)


def fails(res, *messages):
    """Exit status 1 and one line on stderr, 'error: ...' with each of messages."""
    assert res.returncode == 1, (res.returncode, res.stderr)
    assert res.stderr.strip().count("\n") == 0, res.stderr
    assert res.stderr.startswith("error: ") and all(m in res.stderr for m in messages), res.stderr


def test_summary_malformed_inputs_fail_in_one_line(inputs):
    tmp, grids, speed = inputs
    out = tmp / "x.png"
    broken = tmp / "broken.jsonl"
    broken.write_text(speed.read_text().splitlines()[0] + "\n{not json\n")
    fails(run("--grids", grids, "--speed", broken, "-o", out), f"error: {broken}:2: invalid JSON")
    partial = tmp / "partial.jsonl"
    partial.write_text('{"model_file": "Tiny-1M.gguf", "ok": true}\n')
    fails(run("--grids", grids, "--speed", partial, "-o", out), f"{partial}:1: record without")

    for length in (0, -8192):
        fails(run("--grids", grids, "--speed", speed, "-o", out, "--length", length), f"--length {length}")
    fails(run("--grids", grids, "--speed", speed, "-o", out, "--threads", 0), "--threads 0")

    good = record("Tiny-1M.gguf", "h2o", ["h2o:keep=0.5"], "decode", 8192, 0.8, "2026-01-02T00:00:00+00:00")
    for field, value, message in [("length", "8192", 'length "8192" is not a positive integer'),
                                  ("length", 0, "length 0 is not a positive integer"),
                                  ("threads", "2", 'threads "2" is not a positive integer'),
                                  ("threads", True, "threads true is not a positive integer"),
                                  ("utc", 5, "utc 5 is not a string"),
                                  ("machine", ["avx512"], 'machine ["avx512"] is not a string'),
                                  ("specs", "h2o:keep=0.5", "specs \"h2o:keep=0.5\" is not a list of strings"),
                                  ("specs", ["h2o:keep=0.5,keep=0.6"], "option 'keep' given twice")]:
        wrong = tmp / "wrong.jsonl"
        wrong.write_text(json.dumps(good) + "\n" + json.dumps(good | {field: value}) + "\n")
        fails(run("--grids", grids, "--speed", wrong, "-o", out), f"{wrong}:2: unreadable record (", message)

    bad = tmp / "bad"
    bad.mkdir()
    (bad / "g.csv").write_text("policy,value\ndense,1\n")
    fails(run("--grids", bad, "--speed", speed, "-o", out), "not a tokensieve sweep CSV")
    (bad / "g.csv").write_text(HEADER + "dense,0,s,c4,ppl,20,0.1,100,1,100,1,,,,,,,,\n")
    fails(run("--grids", bad, "--speed", speed, "-o", out), "g.json: missing")
    (bad / "g.csv").write_text(HEADER + "dense,0,s,c4,ppl,20,0.1,100,1,100,1,,,,,,,,\nh2o-0.5,0,s,c4,ppl,21\n")
    fails(run("--grids", bad, "--speed", speed, "-o", out), f"{bad / 'g.csv'}:3: 6 fields, the header has 19")
    write_grid(bad, "g", "models/Tiny-1M.gguf", ["dense,0,s,c4,ppl,0,0.1,100,1,100,1,,,,,,,,\n",
                                                 "h2o-0.5,0,s,c4,ppl,21,0.1,100,1,100,1,,,,,,,,\n"],
               [("dense", []), ("h2o-0.5", ["h2o:keep=0.5"])])
    fails(run("--grids", bad, "--speed", speed, "-o", out), "dense perplexity 0 of setting 's' is not positive")
    (bad / "g.csv").write_text(HEADER + "dense,0,s,c4,ppl,20,0.1,100,1,100,1,,,,,,,,\n"
                               "h2o-0.5,0,s,c4,ppl,21,0.1,100,1,100,1,,,,,,,,\n")
    for specs, message in [("h2o:keep=0.5", "policy 'h2o-0.5': specs is not a list of strings"),
                           ([["h2o:keep=0.5"]], "policy 'h2o-0.5': specs is not a list of strings"),
                           (["h2o:0.5"], "'0.5' is not key=value"),
                           (["h2o:keep=0.5,keep=0.6"], "option 'keep' given twice")]:
        (bad / "g.json").write_text(json.dumps({"model": "models/Tiny-1M.gguf", "policies": [
            {"label": "dense", "specs": []}, {"label": "h2o-0.5", "specs": specs}]}))
        fails(run("--grids", bad, "--speed", speed, "-o", out), f"{bad / 'g.json'}: ", message)
    (bad / "g.json").write_text(json.dumps({"model": 7, "policies": []}))
    fails(run("--grids", bad, "--speed", speed, "-o", out), "model is not a file name")
    assert not out.exists()
