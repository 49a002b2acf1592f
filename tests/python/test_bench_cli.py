"""tokensieve bench through the CLI: the JSON report, policies measured beside dense, usage errors."""
import json
import subprocess

from conftest import find_model


def bench(ts_bin, *args):
    model = find_model("stories260K.gguf")
    return subprocess.run([str(ts_bin), "bench", "-m", str(model), "-t", "1", *args],
                          capture_output=True, text=True, timeout=120)


def test_bench_json_has_the_issue_fields(ts_bin):
    res = bench(ts_bin, "-p", "32", "-n", "8", "-r", "2", "--json")
    assert res.returncode == 0, res.stderr
    j = json.loads(res.stdout)
    for key in ("prefill_tps", "decode_tps", "prefill_cpu_tps", "decode_cpu_tps", "peak_rss_bytes",
                "kv_bytes_per_token", "kv_held_bytes_per_token", "decode_bandwidth_gbs", "machine_bandwidth_gbs"):
        assert j[key] > 0, key
    assert len(j["prefill_tps_all"]) == 2 and len(j["decode_tps_all"]) == 2
    assert j["policies"] == [] and "dense" not in j
    assert j["kv_held_fraction"] == 1 and j["kv_held_bytes_per_token"] == j["kv_bytes_per_token"]
    assert j["decode_bandwidth_fraction"] == j["decode_bandwidth_gbs"] / j["machine_bandwidth_gbs"]


def test_bench_policy_beside_dense(ts_bin):
    res = bench(ts_bin, "-p", "32", "-n", "8", "-r", "2", "--policy", "sleb:layers=1", "--vs-dense", "--json")
    assert res.returncode == 0, res.stderr
    j = json.loads(res.stdout)
    assert j["policies"] == ["sleb:layers=1"] and j["dense"]["policies"] == []
    assert len(j["dense"]["decode_tps_all"]) == 2
    speedup = j["speedup_vs_dense"]
    assert abs(speedup["decode"] - j["decode_tps"] / j["dense"]["decode_tps"]) < 1e-9
    assert abs(speedup["prefill"] - j["prefill_tps"] / j["dense"]["prefill_tps"]) < 1e-9
    assert abs(speedup["decode_cpu"] - j["decode_cpu_tps"] / j["dense"]["decode_cpu_tps"]) < 1e-9
    assert j["kv_held_fraction"] < 1 and j["dense"]["kv_held_fraction"] == 1  # SLEB holds nothing at layer 1


def test_bench_several_configurations_in_one_run(ts_bin):
    res = bench(ts_bin, "-p", "0", "-n", "4", "-d", "64", "-r", "2", "--config", "sleb:layers=1",
                "--config", "kvquant:bits=4,group=16;pfn:n=4", "--vs-dense", "--json")
    assert res.returncode == 0, res.stderr
    j = json.loads(res.stdout)
    sleb, coded = j["configs"]
    assert sleb["policies"] == ["sleb:layers=1"] and coded["policies"] == ["kvquant:bits=4,group=16", "pfn:n=4"]
    assert j["policies"] == sleb["policies"] and j["decode_tps"] == sleb["decode_tps"]  # the first on top
    for c in (sleb, coded):
        assert len(c["decode_tps_all"]) == 2
        assert abs(c["speedup_vs_dense"]["decode"] - c["decode_tps"] / j["dense"]["decode_tps"]) < 1e-9
    # The cache's resident memory: coded rows take less than F16 ones, and every cache holds some.
    assert 0 < coded["kv_bytes_per_token"] < j["dense"]["kv_bytes_per_token"]
    assert sleb["kv_resident_bytes"] > 0 and j["dense"]["kv_resident_bytes"] > 0


def test_bench_decode_at_depth_with_an_evicting_policy_repeats(ts_bin):
    # H2O's eviction state cannot be rewound to the depth: every repetition refills the context.
    res = bench(ts_bin, "-p", "0", "-n", "4", "-d", "40", "-r", "3", "--policy", "h2o:keep=0.5", "--json")
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)["decode_tps_all"]) == 3


def test_bench_usage_errors(ts_bin):
    for args in (["--vs-dense"], ["--policy", "nosuch:x=1"], ["-p", "0", "-n", "0"], ["--config", "quest:keep=0.5;"],
                 ["--config", ""]):
        res = bench(ts_bin, *args)
        assert res.returncode != 0, args
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), (args, res.stderr)
