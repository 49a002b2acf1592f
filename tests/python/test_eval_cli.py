"""`tokensieve eval` and `tokensieve ppl --dataset` end to end on stories260K: JSON shapes, flags, and one-line
errors for bad data. The scoring itself is checked by the unit tests (tests/unit/test_eval_*.cpp) and against
lm-evaluation-harness in docs/results/eval_parity.md."""
import json
import os
import subprocess

import pytest

from conftest import ROOT, TS_SHARED_DIR, find_model

FIXTURES = ROOT / "tests" / "fixtures" / "eval"
DATA = TS_SHARED_DIR / "data"
TASKS = ["piqa", "arc_easy", "arc_challenge", "hellaswag", "winogrande", "boolq"]


@pytest.fixture(scope="module")
def stories():
    return str(find_model("stories260K.gguf"))


def run(ts_bin, *args, env=None, timeout=120):
    return subprocess.run([str(ts_bin), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def one_error_line(res):
    assert res.returncode == 1, res
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    return lines[0]


def check_metrics(m, n):
    assert set(m) == {"acc", "acc_norm", "acc_stderr", "n"}
    assert m["n"] == n
    assert 0 <= m["acc"] <= 1 and 0 <= m["acc_norm"] <= 1 and m["acc_stderr"] >= 0


@pytest.mark.runtime(2)
def test_eval_piqa_limit_json(ts_bin, stories):
    if not (DATA / "piqa" / "original" / "valid.jsonl").is_file():
        pytest.skip(f"no PIQA data in {DATA}")
    res = run(ts_bin, "eval", "--task", "piqa", "--limit", "20", "--json", "-m", stories, "--data-dir", str(DATA), "-t", "2")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert list(out) == ["piqa"]
    check_metrics(out["piqa"], 20)


@pytest.mark.runtime(1)
def test_eval_every_task_on_fixtures_and_table(ts_bin, stories, tmp_path):
    # Comma list and a repeated --task; TS_DATA_DIR stands in for --data-dir.
    args = ["eval", "--task", ",".join(TASKS[:3]), "--task", ",".join(TASKS[3:]), "-m", stories, "-t", "1"]
    res = run(ts_bin, *args, "--json", "--samples", str(tmp_path / "s.jsonl"), env={"TS_DATA_DIR": str(FIXTURES)})
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert list(out) == TASKS
    counts = {"piqa": 3, "arc_easy": 2, "arc_challenge": 1, "hellaswag": 2, "winogrande": 2, "boolq": 2}
    for task, n in counts.items():
        check_metrics(out[task], n)
    samples = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert len(samples) == sum(counts.values())
    assert samples[0]["requests"][0] == ["Question: How do I keep bread fresh?\nAnswer:", " Store it in a paper bag."]
    assert all(len(s["lls"]) == len(s["requests"]) and all(ll < 0 for ll in s["lls"]) for s in samples)

    table = run(ts_bin, *args, "--data-dir", str(FIXTURES))
    assert table.returncode == 0, table.stderr
    rows = table.stdout.splitlines()
    assert rows[0].split()[:2] == ["task", "n"] and [r.split()[0] for r in rows[1:]] == TASKS
    assert "+/-" in rows[1]


def test_eval_seeded_subset_is_deterministic(ts_bin, stories):
    args = ["eval", "--task", "piqa", "--limit", "2", "--seed", "3", "--json", "-m", stories, "--data-dir", str(FIXTURES)]
    a, b = run(ts_bin, *args), run(ts_bin, *args)
    assert a.returncode == 0 and a.stdout == b.stdout
    assert json.loads(a.stdout)["piqa"]["n"] == 2


def test_eval_bad_data_names_file_and_line(ts_bin, stories, tmp_path):
    data = tmp_path / "piqa" / "original"
    data.mkdir(parents=True)
    (data / "valid.jsonl").write_text('{"goal": "g", "sol1": "a", "sol2": "b"}\n{"goal": "g", "sol1": \n')
    (data / "valid-labels.lst").write_text("0\n1\n")
    err = one_error_line(run(ts_bin, "eval", "--task", "piqa", "-m", stories, "--data-dir", str(tmp_path)))
    assert f"{data / 'valid.jsonl'}:2: invalid JSON" in err
    err = one_error_line(run(ts_bin, "eval", "--task", "boolq", "-m", stories, "--data-dir", str(tmp_path)))
    assert "boolq_validation.llmfoundry.jsonl: cannot open file" in err


def test_eval_usage_errors(ts_bin, stories):
    res = run(ts_bin, "eval", "--task", "mmlu", "-m", stories)
    assert res.returncode == 2 and res.stderr.startswith("error:") and "mmlu" in res.stderr
    res = run(ts_bin, "eval", "-m", stories)
    assert res.returncode == 2 and "--task" in res.stderr


@pytest.mark.runtime(1)
def test_ppl_c4_defaults_to_gptq_windows(ts_bin, stories):
    res = run(ts_bin, "ppl", "-m", stories, "--dataset", "c4", "--data-dir", str(FIXTURES), "-c", "8", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["dataset"] == "c4" and out["protocol"] == "stride" and out["stride"] == 8 and out["ctx"] == 8
    # GPTQ: whole windows only (the tail is dropped), each scored on all but its first token.
    assert out["tokens_used"] == out["chunks"] * 8 < out["tokens_total"]
    assert out["tokens_scored"] == out["chunks"] * 7
    assert out["ppl"] > 1 and out["ppl_stderr"] > 0


@pytest.mark.runtime(2)
def test_ppl_wikitext2_protocols(ts_bin, stories):
    if not (DATA / "wikitext2" / "wiki.test.raw").is_file():
        pytest.skip(f"no WikiText-2 in {DATA}")
    common = ["ppl", "-m", stories, "--dataset", "wikitext2", "--data-dir", str(DATA), "-c", "64", "--json"]
    llama = json.loads(run(ts_bin, *common, "--chunks", "3").stdout)
    assert llama["protocol"] == "llamacpp" and llama["chunks"] == 3 and llama["tokens_scored"] == 3 * 31
    assert "stride" not in llama
    stride = json.loads(run(ts_bin, *common, "--protocol", "stride", "--stride", "16", "--chunks", "3").stdout)
    assert stride["protocol"] == "stride" and stride["stride"] == 16 and stride["tokens_scored"] == 63 + 2 * 16


def test_ppl_usage_errors(ts_bin, stories, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("Once upon a time there was a dog. " * 20)
    res = run(ts_bin, "ppl", "-m", stories, "-f", str(text), "--dataset", "c4")
    assert res.returncode == 2 and res.stderr.startswith("error:")
    res = run(ts_bin, "ppl", "-m", stories)
    assert res.returncode == 2 and "--dataset" in res.stderr
    res = run(ts_bin, "ppl", "-m", stories, "-f", str(text), "--stride", "4")
    assert res.returncode == 2 and "--stride" in res.stderr
    res = run(ts_bin, "ppl", "-m", stories, "--dataset", "c4", "--data-dir", str(tmp_path))
    assert "c4-validation.00000-of-00008.first1025.jsonl: cannot open file" in one_error_line(res)


@pytest.mark.runtime(3)
def test_eval_long_context_tasks_on_fixtures(ts_bin, stories, tmp_path):
    args = ["eval", "--task", "multi_news,needle,kv_retrieval,coref", "-m", stories, "--data-dir", str(FIXTURES),
            "-t", "1", "--lengths", "400,500", "--depths", "0,1", "--kv-pairs", "2", "--limit", "3", "--seed", "4",
            "--json", "--samples", str(tmp_path / "s.jsonl")]
    res = run(ts_bin, *args)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert list(out) == ["multi_news", "needle", "kv_retrieval", "coref"]
    assert out["multi_news"]["metric"] == "rouge_l" and out["multi_news"]["n"] == 2 and "cells" not in out["multi_news"]
    assert out["needle"]["metric"] == "exact_match" and out["needle"]["n"] == 3
    assert sum(c["n"] for c in out["needle"]["cells"]) == 3
    assert all(set(c) == {"length", "depth", "score", "n"} for c in out["needle"]["cells"])
    assert out["kv_retrieval"]["n"] == 2 and {c["pairs"] for c in out["kv_retrieval"]["cells"]} == {2}
    assert set(out["coref"]) == {"acc", "coverage", "acc_stderr", "n"} and out["coref"]["n"] == 3
    for m in out.values():
        assert 0 <= m.get("score", m.get("acc")) <= 1
    samples = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    needles = [s for s in samples if s["task"] == "needle"]
    assert len(needles) == 3 and all(s["prompt_tokens"] + 24 <= s["cell"]["length"] for s in needles)
    # Deterministic: the same seed gives the same prompts and outputs.
    again = run(ts_bin, *args[:-2], "--samples", str(tmp_path / "t.jsonl"))
    assert again.stdout == res.stdout
    assert (tmp_path / "t.jsonl").read_text() == (tmp_path / "s.jsonl").read_text()
    table = run(ts_bin, *args[:-3])
    assert table.returncode == 0 and "rouge_l" in table.stdout and "length" in table.stdout


def test_eval_long_context_bad_data(ts_bin, stories, tmp_path):
    (tmp_path / "longbench" / "config").mkdir(parents=True)
    for name in ("dataset2prompt.json", "dataset2maxlen.json"):
        (tmp_path / "longbench" / "config" / name).write_text((FIXTURES / "longbench" / "config" / name).read_text())
    (tmp_path / "longbench" / "multi_news.jsonl").write_text('{"input": "", "answers": ["a"]}\n')
    err = one_error_line(run(ts_bin, "eval", "--task", "multi_news", "-m", stories, "--data-dir", str(tmp_path)))
    assert f"{tmp_path / 'longbench' / 'multi_news.jsonl'}:1: missing field 'context'" in err
    err = one_error_line(run(ts_bin, "eval", "--task", "needle", "-m", stories, "--data-dir", str(tmp_path)))
    assert "wiki.test.raw: cannot open file" in err
    # A needle length the model cannot hold is an error, not a silent truncation.
    err = one_error_line(run(ts_bin, "eval", "--task", "needle", "-m", stories, "--data-dir", str(FIXTURES),
                             "--lengths", "4096"))
    assert "does not fit the context" in err


@pytest.mark.runtime(3)
def test_shards_concatenated_are_the_whole_run(ts_bin, stories, tmp_path):
    """--shard I/N: each shard's records, concatenated in shard order (per task), are the whole run's, bit for
    bit, and its counts add up to the whole run's (what tokensieve.sweep merges on a cluster)."""
    if not (DATA / "wikitext2").is_dir():
        pytest.skip(f"no evaluation data in {DATA}")
    commands = {"eval": ["eval", "-m", stories, "--task", "coref,kv_retrieval", "--kv-pairs", "3", "--per-cell", "2",
                         "--limit", "5", "--policy", "h2o:keep=0.5", "-t", "1"],
                "ppl": ["ppl", "-m", stories, "--dataset", "wikitext2", "--data-dir", str(DATA), "-c", "64",
                        "--protocol", "stride", "--stride", "24", "--limit", "7", "-t", "1"]}
    for name, command in commands.items():
        whole = run(ts_bin, *command, "--json", "--samples", str(tmp_path / "whole.jsonl"))
        assert whole.returncode == 0, whole.stderr
        records, outputs = [], []
        for i in range(3):
            part = run(ts_bin, *command, "--json", "--shard", f"{i}/3", "--samples", str(tmp_path / f"{i}.jsonl"))
            assert part.returncode == 0, part.stderr
            outputs.append(json.loads(part.stdout))
            records += [json.loads(line) for line in (tmp_path / f"{i}.jsonl").read_text().splitlines()]
        expected = [json.loads(line) for line in (tmp_path / "whole.jsonl").read_text().splitlines()]
        if name == "eval":  # each shard writes its part of each task in turn: the whole run, task by task
            records.sort(key=lambda r: ["coref", "kv_retrieval"].index(r["task"]))
            assert sum(o["coref"]["n"] for o in outputs) == 5
            total = json.loads(whole.stdout)["sparsity"]
            for key in ("token_layers", "attention_token_layers", "kv_token_layers"):
                assert sum(o["sparsity"][key] for o in outputs) == total[key]
        else:
            assert sum(o["chunks"] for o in outputs) == json.loads(whole.stdout)["chunks"] == 7
            assert [r["window"] for r in records] == list(range(7))
        assert records == expected and len(expected) > 3
    for bad in ("3/3", "1", "a/2"):
        res = run(ts_bin, *commands["ppl"], "--shard", bad)
        assert res.returncode == 2 and "--shard" in res.stderr
