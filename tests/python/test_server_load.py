"""A small bounded load test of `tokensieve serve` through bench/server_load.py (the full one, 300
requests from 16 clients, is in BENCHMARKS.md): mixed streaming and whole-body requests from more
clients than slots, with no failure and a clean SIGTERM exit."""
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
