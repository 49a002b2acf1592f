"""`tokensieve sweep` end to end on stories260K and the eval fixtures: the grid, the per-cell cache that lets an
interrupted sweep resume, the CSV, errors; and tools/plot.py drawing the CSV."""
import csv
import json
import subprocess
import sys

import pytest

from conftest import ROOT, find_model

FIXTURES = ROOT / "tests" / "fixtures" / "eval"


def sweep(ts_bin, out, *args):
    return subprocess.run([str(ts_bin), "sweep", "-o", str(out), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def stories():
    return str(find_model("stories260K.gguf"))


def grid(stories):
    return ["-m", stories, "--data-dir", str(FIXTURES), "-t", "1", "--task", "piqa,wikitext2",
            "--policy", "dense", "--policy", "orthorank:layers=1,3,ratio=0.5", "--setting", "-c 32 --limit 2", "--json"]


@pytest.mark.runtime(2)
def test_sweep_runs_grid_caches_cells_and_resumes(ts_bin, stories, tmp_path):
    res = sweep(ts_bin, tmp_path, *grid(stories))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"csv": str(tmp_path / "sweep.csv"), "cells": 4, "ran": 4, "cached": 0}
    rows = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert [(r["task"], r["policy"]) for r in rows] == [
        ("piqa", "dense"), ("piqa", "orthorank:layers=1,3,ratio=0.5"),
        ("wikitext2", "dense"), ("wikitext2", "orthorank:layers=1,3,ratio=0.5")]
    assert [r["metric"] for r in rows] == ["acc", "acc", "ppl", "ppl"]
    assert rows[0]["sparsity"] == "0" and rows[0]["speedup"] == "1"
    # OrthoRank on 2 of 5 layers with ratio 0.5: a fifth of the (token, layer) steps skipped, measured.
    assert 0.15 < float(rows[1]["sparsity"]) < 0.25 and float(rows[1]["ffn_fraction"]) < 1
    # Each OrthoRank row is paired with the dense row of its task on the cells' samples: the perplexity
    # difference is the difference of the two rows' perplexities, and compare gives the same interval.
    samples = sorted(tmp_path.glob("cells/*.samples.jsonl"))
    assert len(samples) == 4
    assert [r["baseline"] for r in rows] == ["", "dense", "", "dense"]
    # (%.6g in the CSV: each perplexity to 6 significant digits)
    assert float(rows[3]["diff"]) == pytest.approx(float(rows[3]["value"]) - float(rows[2]["value"]),
                                                   abs=1e-5 * float(rows[3]["value"]))
    assert float(rows[3]["diff_lo"]) <= float(rows[3]["diff"]) <= float(rows[3]["diff_hi"])
    def ppl_samples(with_policy):  # the samples beside the cached ppl command with / without a policy
        for path in samples:
            command = json.loads(path.with_name(path.name.replace(".samples.jsonl", ".json")).read_text())["command"]
            if command[0] == "ppl" and ("--policy" in command) == with_policy:
                return path
    dense_s, or_s = ppl_samples(False), ppl_samples(True)
    res = subprocess.run([str(ts_bin), "compare", str(dense_s), str(or_s), "--json"], capture_output=True, text=True)
    got = json.loads(res.stdout)["rows"][0]
    assert float(rows[3]["diff"]) == pytest.approx(got["diff"], rel=1e-5)
    assert (float(rows[3]["diff_lo"]), float(rows[3]["diff_hi"])) == (pytest.approx(got["diff_ci95"][0], rel=1e-5),
                                                                      pytest.approx(got["diff_ci95"][1], rel=1e-5))
    # Right/wrong outcomes: the accuracy difference of the two rows, and McNemar's p.
    assert float(rows[1]["diff"]) == pytest.approx(float(rows[1]["value"]) - float(rows[0]["value"]), abs=1e-6)
    assert 0 < float(rows[1]["mcnemar_p"]) <= 1
    cells = sorted(tmp_path.glob("cells/*.json"))
    assert len(cells) == 4
    # Resume: a missing cell and a cell file cut short by an interruption are run again, the rest is cached.
    cells[0].unlink()
    cells[1].write_text(cells[1].read_text()[:20])
    again = sweep(ts_bin, tmp_path, *grid(stories))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["ran"] == 2 and json.loads(again.stdout)["cached"] == 2
    rows2 = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert [r["value"] for r in rows2] == [r["value"] for r in rows]


def test_sweep_spec_file_and_errors(ts_bin, stories, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"model": stories, "threads": 1, "data_dir": str(FIXTURES), "tasks": ["coref"],
                                "policies": [{"specs": []}, {"label": "half", "sparsity": 0.5,
                                                             "specs": ["orthorank:layers=1,3,ratio=0.5"]}],
                                "settings": [{"label": "two", "args": ["--limit", "2"]}]}))
    res = sweep(ts_bin, tmp_path / "o", "--spec", str(spec), "--json")
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader((tmp_path / "o" / "sweep.csv").open()))
    assert [(r["policy"], r["sparsity"], r["setting"], r["n"]) for r in rows] == [
        ("dense", "0", "two", "2"), ("half", "0.5", "two", "2")]
    # A failing cell stops the sweep with its own error line and the log file that holds it.
    res = sweep(ts_bin, tmp_path / "bad", "-m", stories, "--task", "piqa", "--data-dir", str(tmp_path))
    assert res.returncode == 1
    lines = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "sweep cell failed" in lines[0] and "valid.jsonl: cannot open file" in lines[0]
    spec.write_text("{not json")
    res = sweep(ts_bin, tmp_path / "o", "--spec", str(spec))
    assert res.returncode == 1 and f"{spec}: invalid JSON" in res.stderr
    res = sweep(ts_bin, tmp_path / "o", "-m", stories)
    assert res.returncode == 1 and "no tasks" in res.stderr


def test_plot_sweep_png(tmp_path):
    pytest.importorskip("matplotlib")
    data = tmp_path / "sweep.csv"
    data.write_text("policy,sparsity,setting,task,metric,value,stderr,n,seconds,throughput,speedup,attention_fraction,"
                    "ffn_fraction,kv_fraction\n"
                    "dense,0,default,piqa,acc,0.65,0.02,500,10,50,1,,,\n"
                    "or 0.2,0.2,default,piqa,acc,0.6,0.02,500,8,62.5,1.25,0.8,0.8,1\n"
                    "dense,0,default,wikitext2,ppl,20.1,0.1,9000,10,900,1,,,\n")
    tool = [sys.executable, str(ROOT / "tools" / "plot.py"), "sweep", str(data)]
    for x in ("sparsity", "throughput", "speedup"):
        png = tmp_path / f"{x}.png"
        res = subprocess.run([*tool, "-o", str(png), "--x", x], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = subprocess.run([*tool, "-o", str(tmp_path / "x.png"), "--tasks", "boolq"], capture_output=True, text=True)
    assert res.returncode != 0 and "no rows" in res.stderr
