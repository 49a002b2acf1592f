"""Small runs of bench/server_load.py (the full ones are in BENCHMARKS.md).

The mixed load: streaming and whole-body requests from more clients than slots, with no failure and a
clean SIGTERM exit. The throughput-scaling mode (--streams): `openai` streams on 1 and 2 slots under a
mix of policies give exactly the text each request gives alone, and two streams share engine steps. The
soak (--minutes): valid, malformed and dropped requests with no failure, dropped streams cancelled."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT, find_model


@pytest.mark.runtime(5)
def test_small_load_has_no_failures(ts_bin):
    model = find_model("stories260K.gguf")
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "server_load.py"), "--model", str(model), "--bin",
                          str(ts_bin), "--requests", "40", "--concurrency", "8", "--parallel", "2",
                          "--max-tokens", "48", "--ctx", "256"],
                         capture_output=True, text=True, timeout=300)
    report = json.loads(res.stdout)
    assert res.returncode == 0, (report, res.stderr)
    assert report["failures"] == 0 and report["server_exit_code"] == 0
    assert report["streamed"] == 20
    assert report["generated_tokens"] >= 40 * 24 * 0.5  # most requests ran (EOS may end a few early)
    assert report["latency_p50_s"] <= report["latency_p99_s"]


@pytest.mark.runtime(3)
def test_streams_scaling_batches_and_matches_alone(ts_bin, tmp_path):
    pytest.importorskip("openai")
    pytest.importorskip("matplotlib")
    model = find_model("stories260K.gguf")
    # 128 tokens, not fewer: stories260K decodes a token in ~0.2 ms, and the two client threads' requests
    # reach the server up to ~10 ms apart, so a shorter stream may finish before the other one starts.
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "server_load.py"), "--model", str(model), "--bin",
                          str(ts_bin), "--streams", "1,2", "--gen-tokens", "128", "--rounds-per-stream", "1",
                          "--policy-mix", "--plot", str(tmp_path / "scaling.png"),
                          "--json-out", str(tmp_path / "scaling.json")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["streams"] for r in rows] == [1, 2]
    assert rows == json.loads((tmp_path / "scaling.json").read_text())
    for r in rows:
        assert r["failures"] == 0 and r["server_exit_code"] == 0
        assert r["mismatches"] == 0
        assert r["generated_tokens"] == r["requests"] * 128
        assert r["ttft_p50_ms"] <= r["ttft_p99_ms"] and r["itl_p50_ms"] <= r["itl_p99_ms"]
    assert rows[1]["policies"] == ["", "kvquant:bits=4,group=32"]  # stories260K has too few layers for orthorank
    assert rows[1]["mean_batch_sequences"] > 1, rows[1]  # the two streams shared engine steps
    assert (tmp_path / "scaling.png").stat().st_size > 0
    assert "| 2 |" in res.stderr


@pytest.mark.runtime(1)
def test_short_soak_mixes_valid_malformed_and_dropped_requests(ts_bin, tmp_path):
    pytest.importorskip("matplotlib")
    model = find_model("stories260K.gguf")
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "server_load.py"), "--model", str(model), "--bin",
                          str(ts_bin), "--minutes", "0.2", "--concurrency", "4", "--parallel", "2", "--ctx", "256",
                          "--rss-every", "0.5", "--plot-rss", str(tmp_path / "rss.png")],
                         capture_output=True, text=True, timeout=120)
    report = json.loads(res.stdout)
    assert res.returncode == 0, (report, res.stderr)
    assert all(report["requests"][k] > 0 for k in ("valid", "malformed", "dropped")), report
    assert not any(report["failures"].values()) and report["errors"] == []
    assert report["server_cancelled_jobs"] > 0  # dropped streams were cancelled, not run to the end
    assert report["server_exit_code"] == 0
    assert (tmp_path / "rss.png").stat().st_size > 0
