"""`tokensieve compare`: paired statistics of two runs' --samples files, checked against NumPy and SciPy
(point estimates exactly, bootstrap intervals to resampling noise, McNemar's p against scipy's exact
binomial test), `ppl --samples` end to end, and one-line errors for files that do not pair."""
import json
import os
import subprocess

import numpy as np
import pytest
from scipy.stats import binomtest

from conftest import find_model


def run(ts_bin, *args):
    return subprocess.run([str(ts_bin), *args], capture_output=True, text=True, timeout=120, env=dict(os.environ))


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def one_error_line(res, needle):
    assert res.returncode == 1, res
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], res.stderr


def numpy_paired_bootstrap(stat, a, b, resamples=10000, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(resamples, len(a)))
    d = np.array([stat(b[i]) - stat(a[i]) for i in idx])
    return np.quantile(d, 0.025), np.quantile(d, 0.975)


def test_compare_perplexity_windows(ts_bin, tmp_path):
    rng = np.random.default_rng(1)
    tokens = rng.integers(200, 257, size=80)
    per_token_a = rng.uniform(2.5, 3.5, size=80)
    per_token_b = per_token_a + rng.normal(0.05, 0.05, size=80)
    a = write_jsonl(tmp_path / "a.jsonl", [{"window": w, "tokens": int(n), "nll_sum": float(x * n)}
                                           for w, (n, x) in enumerate(zip(tokens, per_token_a))])
    # B's windows in another order: they pair by index, not by line.
    b = write_jsonl(tmp_path / "b.jsonl", [{"window": w, "tokens": int(tokens[w]), "nll_sum": float(per_token_b[w] * tokens[w])}
                                           for w in reversed(range(80))])
    res = run(ts_bin, "compare", a, b, "--json")
    assert res.returncode == 0, res.stderr
    (row,) = json.loads(res.stdout)["rows"]
    ppl = lambda nll, n: np.exp(nll.sum() / n.sum())  # noqa: E731
    pa, pb = ppl(per_token_a * tokens, tokens), ppl(per_token_b * tokens, tokens)
    assert row["units"] == 80
    assert row["a"] == pytest.approx(pa, rel=1e-12) and row["b"] == pytest.approx(pb, rel=1e-12)
    assert row["diff"] == pytest.approx(pb - pa, rel=1e-9)
    both = np.stack([per_token_a * tokens, per_token_b * tokens, tokens], axis=1)
    rng = np.random.default_rng(0)
    diffs = []
    for _ in range(10000):
        s = both[rng.integers(0, 80, size=80)]
        diffs.append(ppl(s[:, 1], s[:, 2]) - ppl(s[:, 0], s[:, 2]))
    lo, hi = np.quantile(diffs, [0.025, 0.975])
    width = hi - lo
    assert row["diff_ci95"][0] == pytest.approx(lo, abs=0.1 * width)
    assert row["diff_ci95"][1] == pytest.approx(hi, abs=0.1 * width)
    assert "mcnemar_p" not in row


def test_compare_eval_documents(ts_bin, tmp_path):
    rng = np.random.default_rng(2)
    docs = {"piqa": 300, "boolq": 200}
    a_records, b_records, truth = [], [], {}
    for task, n in docs.items():
        a = rng.random(n) < 0.70
        b = np.where(rng.random(n) < 0.15, ~a, a)  # B flips 15% of A's outcomes
        truth[task] = (a.astype(float), b.astype(float))
        a_records += [{"task": task, "doc_id": i, "acc": bool(x), "acc_norm": bool(x)} for i, x in enumerate(a)]
        b_records += [{"task": task, "doc_id": i, "acc": bool(x), "acc_norm": bool(not y)}
                      for i, (x, y) in enumerate(zip(b, a))]
    a_path, b_path = write_jsonl(tmp_path / "a.jsonl", a_records), write_jsonl(tmp_path / "b.jsonl", b_records)
    res = run(ts_bin, "compare", a_path, b_path, "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["metric"] == "acc"
    rows = {r["name"]: r for r in out["rows"]}
    assert set(rows) == {"piqa", "boolq", "average"}
    for task, (a, b) in truth.items():
        r = rows[task]
        assert r["units"] == docs[task] and r["a"] == pytest.approx(a.mean()) and r["b"] == pytest.approx(b.mean())
        lo, hi = numpy_paired_bootstrap(np.mean, a, b)
        width = hi - lo
        assert r["diff_ci95"][0] == pytest.approx(lo, abs=0.1 * width)
        assert r["diff_ci95"][1] == pytest.approx(hi, abs=0.1 * width)
        a_only, b_only = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
        assert (r["a_only"], r["b_only"]) == (a_only, b_only)
        expected_p = binomtest(min(a_only, b_only), a_only + b_only, 0.5).pvalue
        assert r["mcnemar_p"] == pytest.approx(expected_p, rel=1e-9)
    avg = rows["average"]
    assert avg["a"] == pytest.approx(np.mean([truth[t][0].mean() for t in docs]))
    assert avg["diff"] == pytest.approx(np.mean([truth[t][1].mean() - truth[t][0].mean() for t in docs]))
    # Another field: acc_norm, where B is A's complement in every document.
    res = run(ts_bin, "compare", a_path, b_path, "--metric", "acc_norm", "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)["rows"]}
    assert rows["piqa"]["a_only"] + rows["piqa"]["b_only"] == docs["piqa"]
    # The text table names every row.
    text = run(ts_bin, "compare", a_path, b_path).stdout
    assert "| piqa |" in text and "| average |" in text and "95% CI" in text


def test_compare_mixed_tasks_take_each_tasks_own_metric(ts_bin, tmp_path):
    # eval --samples of a multiple-choice task (acc) and a generation task (score) in one file.
    a = [{"task": "piqa", "doc_id": i, "acc": i % 2 == 0} for i in range(10)]
    a += [{"task": "needle", "doc_id": i, "score": 0.5} for i in range(4)]
    b = [{"task": "piqa", "doc_id": i, "acc": True} for i in range(10)]
    b += [{"task": "needle", "doc_id": i, "score": 0.75} for i in range(4)]
    res = run(ts_bin, "compare", write_jsonl(tmp_path / "a.jsonl", a), write_jsonl(tmp_path / "b.jsonl", b), "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)["rows"]}
    assert rows["piqa"]["metric"] == "acc" and rows["piqa"]["diff"] == pytest.approx(0.5)
    assert rows["needle"]["metric"] == "score" and rows["needle"]["diff"] == pytest.approx(0.25)
    assert "mcnemar_p" in rows["piqa"] and "mcnemar_p" not in rows["needle"]
    assert rows["average"]["diff"] == pytest.approx(0.375) and "mcnemar_p" not in rows["average"]


def test_compare_refuses_files_that_do_not_pair(ts_bin, tmp_path):
    w = lambda name, recs: write_jsonl(tmp_path / name, recs)  # noqa: E731
    a = w("a.jsonl", [{"window": 0, "tokens": 10, "nll_sum": 30.0}, {"window": 1, "tokens": 10, "nll_sum": 31.0}])
    one_error_line(run(ts_bin, "compare", a, w("b1.jsonl", [{"window": 0, "tokens": 10, "nll_sum": 30.0},
                                                          {"window": 1, "tokens": 9, "nll_sum": 31.0}])),
                   "not the same text")
    one_error_line(run(ts_bin, "compare", a, w("b2.jsonl", [{"window": 0, "tokens": 10, "nll_sum": 30.0}])), "windows")
    one_error_line(run(ts_bin, "compare", a, w("b3.jsonl", [{"task": "piqa", "doc_id": 0, "acc": True}])), "kind")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"window": 0, "tokens": 10, "nll_sum": 30.0}\nnot json\n')
    one_error_line(run(ts_bin, "compare", a, str(bad)), "line 2")
    one_error_line(run(ts_bin, "compare", a, str(tmp_path / "missing.jsonl")), "cannot open")
    e = w("e.jsonl", [{"task": "piqa", "doc_id": 0, "acc": True}])
    one_error_line(run(ts_bin, "compare", e, w("e2.jsonl", [{"task": "piqa", "doc_id": 1, "acc": True}])),
                   "document")
    one_error_line(run(ts_bin, "compare", e, e, "--metric", "rouge"), "rouge")
    twice = w("twice.jsonl", [{"task": "piqa", "doc_id": 0, "acc": True}] * 2)
    one_error_line(run(ts_bin, "compare", twice, twice), "twice")
    one_error_line(run(ts_bin, "compare", a, w("neg.jsonl", [{"window": -1, "tokens": 10, "nll_sum": 30.0},
                                                            {"window": 1, "tokens": 10, "nll_sum": 31.0}])),
                   "window")
    res = run(ts_bin, "compare", a)
    assert res.returncode == 2 and res.stderr.startswith("error:")


def test_ppl_samples_pair_two_runs(ts_bin, tmp_path):
    stories = str(find_model("stories260K.gguf"))
    text = tmp_path / "t.txt"
    text.write_text("Once upon a time there was a little dog who liked to play in the park with a red ball. " * 40)
    runs = {}
    for name, extra in (("dense", []), ("sleb", ["--policy", "sleb:layers=1"])):
        samples = tmp_path / f"{name}.jsonl"
        res = run(ts_bin, "ppl", "-m", stories, "-f", str(text), "-c", "64", "--samples", str(samples), "--json",
                  *extra)
        assert res.returncode == 0, res.stderr
        runs[name] = (json.loads(res.stdout), [json.loads(x) for x in samples.read_text().splitlines()])
    summary, windows = runs["dense"]
    assert len(windows) == summary["chunks"]
    assert sum(w["tokens"] for w in windows) == summary["tokens_scored"]
    for w in windows:
        assert len(w["nll"]) == w["tokens"] and w["nll_sum"] == pytest.approx(sum(w["nll"]))
    res = run(ts_bin, "compare", str(tmp_path / "dense.jsonl"), str(tmp_path / "sleb.jsonl"), "--json")
    assert res.returncode == 0, res.stderr
    (row,) = json.loads(res.stdout)["rows"]
    assert row["a"] == pytest.approx(summary["ppl"], rel=1e-6)
    assert row["b"] == pytest.approx(runs["sleb"][0]["ppl"], rel=1e-6)
