"""tokensieve on a Ray cluster of two nodes on loopback (ray.cluster_utils.Cluster): the distributed sweep gives
the cells `tokensieve sweep` gives, bit for bit, through a lost worker and a crashed driver; the Ray Serve
deployment answers the openai client as `tokensieve serve` does."""
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, TS_PYTHON_DIR, TS_SHARED_DIR, find_model
from server_process import Server

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

DATA = TS_SHARED_DIR / "data"
TIMING_COLUMNS = {"seconds", "throughput", "speedup"}  # wall time: the one thing a sharded cell changes


@pytest.fixture(scope="module")
def cluster():
    # Workers import the package of this build. Both nodes on this host (Ray binds the host's own address,
    # so no packet leaves the machine), one CPU each.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TS_PYTHON_DIR), os.environ.get("PYTHONPATH")]))
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address)
    yield c
    ray.shutdown()
    c.shutdown()


def write_spec(path, model, policies, tasks, args, data=DATA):
    if not (DATA / "wikitext2").is_dir():
        pytest.skip(f"no evaluation data in {DATA}")
    path.write_text(json.dumps({"model": str(model), "threads": 1, "data_dir": str(data), "tasks": tasks,
                                "policies": [{"specs": p} for p in policies], "settings": [{"args": args}]}))
    return path


@pytest.fixture
def processes():
    """Processes a test starts, killed whatever the test's outcome."""
    started = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def ray_sweep(cluster, spec, out, *args, started=None):
    """The sweep's JSON summary; with `started` (a list), the running process instead, added to the list."""
    cmd = [sys.executable, "-m", "tokensieve.sweep", str(spec), "-o", str(out), "--ray", cluster.address, "--json",
           *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=os.environ.copy())
    if started is not None:
        started.append(proc)
        return proc
    try:
        out_text, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    return summary(out_text)


def summary(stdout):
    return json.loads(stdout.strip().splitlines()[-1])  # the last line: Ray may print its own notes before it


def cli_sweep(ts_bin, spec, out):
    res = subprocess.run([str(ts_bin), "sweep", "--spec", str(spec), "-o", str(out)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr


def cells(out):
    """Each cell's command -> (output, samples text): the cache a sweep leaves."""
    found = {}
    for path in (out / "cells").glob("*.json"):
        cell = json.loads(path.read_text())
        samples = path.with_name(path.name.replace(".json", ".samples.jsonl")).read_text()
        found[tuple(cell["command"])] = (cell["output"], samples)
    return found


def table(out):
    return [{k: v for k, v in row.items() if k not in TIMING_COLUMNS}
            for row in csv.DictReader((out / "sweep.csv").open())]


def assert_same_sweep(a, b):
    ca, cb = cells(a), cells(b)
    assert ca.keys() == cb.keys() and len(ca) > 0
    for command in ca:
        assert ca[command] == cb[command], command  # outputs and per-document samples, bit for bit
    assert table(a) == table(b)


@pytest.mark.runtime(40)
@pytest.mark.parametrize("model", ["stories260K.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"])
def test_sharded_sweep_equals_single_machine_sweep(cluster, ts_bin, tmp_path, model):
    spec = write_spec(tmp_path / "spec.json", find_model(model), [[], ["orthorank:layers=1,3,ratio=0.5"]],
                      ["arc_easy", "wikitext2"], ["-c", "256", "--limit", "4"])
    cli_sweep(ts_bin, spec, tmp_path / "one")
    got = ray_sweep(cluster, spec, tmp_path / "ray", "--shards", "3")
    assert got["cells"] == 4 and got["ran"] == 4 and got["shards_run"] == 12 and not got["failed"]
    assert_same_sweep(tmp_path / "one", tmp_path / "ray")
    again = ray_sweep(cluster, spec, tmp_path / "ray", "--shards", "3")
    assert again["ran"] == 0 and again["cached"] == 4 and again["shards_run"] == 0


@pytest.mark.runtime(20)
def test_cached_shards_count_only_for_the_same_input_files(cluster, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA / "arc", data / "arc")
    spec = write_spec(tmp_path / "spec.json", find_model("stories260K.gguf"), [[]], ["arc_easy"], ["--limit", "6"],
                      data=data)
    out = tmp_path / "ray"
    first = ray_sweep(cluster, spec, out, "--shards", "3")
    assert first["shards_run"] == 3

    def rerun():  # the cell's file removed: only its shards can spare the work
        for cell in (out / "cells").glob("*.json"):
            cell.unlink()
        return ray_sweep(cluster, spec, out, "--shards", "3")
    assert rerun()["shards_cached"] == 3
    (data / "arc" / "added.txt").write_text("a file the cell's data directory did not have")
    changed = rerun()
    assert changed["shards_cached"] == 0 and changed["shards_run"] == 3


def smollm_grid(tmp_path):
    return write_spec(tmp_path / "spec.json", find_model("SmolLM2-135M-Instruct.Q4_1.gguf"),
                      [[], ["h2o:keep=0.5"]], ["arc_easy", "wikitext2"], ["-c", "128", "--limit", "12"])


def shard_files(out):
    return {p: p.stat().st_mtime_ns for p in (out / "cells" / "shards").glob("*.json")}


@pytest.mark.runtime(60)
def test_lost_worker_and_crashed_driver_lose_nothing(cluster, ts_bin, tmp_path, processes):
    spec = smollm_grid(tmp_path)
    cli_sweep(ts_bin, spec, tmp_path / "one")
    out = tmp_path / "ray"
    # A driver killed once some shards have finished: rerun, and none of them runs again.
    proc = ray_sweep(cluster, spec, out, "--shards", "6", started=processes)
    deadline = time.monotonic() + 120
    while len(shard_files(out)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = shard_files(out)
    assert 3 <= len(before) < 24
    # A worker killed while the rerun goes on: its shard is retried on a new worker.
    proc = ray_sweep(cluster, spec, out, "--shards", "6", started=processes)
    killed = None
    while killed is None and time.monotonic() < deadline:
        workers = subprocess.run(["pgrep", "-f", "ray::EngineWorker"], capture_output=True, text=True).stdout.split()
        if workers and len(shard_files(out)) > len(before):
            killed = int(workers[0])
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    assert killed, "no worker to kill"
    out_text, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    got = summary(out_text)
    assert got["shards_cached"] >= len(before) and got["shards_run"] + got["shards_cached"] == 24
    after = shard_files(out)
    assert all(after[p] == t for p, t in before.items())  # finished shards were not recomputed
    assert_same_sweep(tmp_path / "one", out)


def test_sweep_errors(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "tokensieve.sweep", *args], capture_output=True, text=True,
                              cwd=ROOT, env=os.environ.copy(), timeout=60)
    res = run(str(tmp_path / "missing.json"), "-o", str(tmp_path), "--ray", "local")
    assert res.returncode == 2 and "no such file" in res.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": 3}')
    res = run(str(bad), "-o", str(tmp_path / "o"), "--ray", "local")
    assert res.returncode == 1 and res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1
    res = run(str(bad), "-o", str(tmp_path / "o"), "--ray", "local", "--shards", "0")
    assert res.returncode == 2 and "--shards must be at least 1" in res.stderr
    missing_model = write_spec(tmp_path / "m.json", tmp_path / "none.gguf", [[]], ["arc_easy"], ["--limit", "2"])
    res = run(str(missing_model), "-o", str(tmp_path / "o"), "--ray", "local")
    assert res.returncode == 1 and "none.gguf: no such file" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    spec = write_spec(tmp_path / "s.json", find_model("stories260K.gguf"), [[]], ["arc_easy"], ["--limit", "2"])
    res = run(str(spec), "-o", str(a_file), "--ray", "local")
    assert res.returncode == 1 and "cannot make the output directory" in res.stderr


def test_sweep_refuses_workers_the_cluster_cannot_place(cluster, tmp_path):
    from tokensieve import sweep

    spec = write_spec(tmp_path / "s.json", find_model("stories260K.gguf"), [[]], ["arc_easy"], ["--limit", "2"])
    with pytest.raises(Exception, match="no node of the cluster has 2 CPUs"):
        sweep.run(str(spec), str(tmp_path / "o"), cluster.address, threads=2)
    with pytest.raises(Exception, match="the cluster holds 2 workers of 1 threads"):
        sweep.run(str(spec), str(tmp_path / "o"), cluster.address, workers=3)


@pytest.mark.runtime(40)
def test_serve_deployment_answers_like_tokensieve_serve(cluster, ts_bin):
    from openai import OpenAI
    from ray import serve

    from tokensieve.serve_ray import deployment

    model = find_model("SmolLM2-135M-Instruct.Q4_1.gguf")
    port = free_port()  # for Ray Serve's HTTP proxy
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        serve.run(deployment(str(model), ["-t", "1", "-c", "512"], binary=str(ts_bin), replicas=2),
                  name="tokensieve", route_prefix="/")
        replicated = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
        with Server(ts_bin, model, "-c", "512") as single:
            direct = OpenAI(base_url=single.url + "/v1", api_key="none", max_retries=0)
            for client_kwargs in ({}, {"extra_body": {"policy": "h2o:keep=0.5"}}):
                texts = [c.completions.create(model="m", prompt="The capital of France is", max_tokens=16,
                                              temperature=0, **client_kwargs).choices[0].text
                         for c in (direct, replicated)]
                assert texts[0] == texts[1] and texts[0]
            chats = []
            for c in (direct, replicated):
                stream = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hello"}],
                                                   max_tokens=16, temperature=0, stream=True)
                chats.append("".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices))
            assert chats[0] == chats[1] and chats[0]
            # A bad request is the engine's 4xx JSON error, not a proxy failure.
            with pytest.raises(Exception) as err:
                replicated.completions.create(model="m", prompt="x", max_tokens=-3)
            assert getattr(err.value, "status_code", None) == 400
    finally:
        serve.shutdown()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_ray_refuses_contradictory_scaling(ts_bin):
    model = find_model("stories260K.gguf")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "tokensieve.serve_ray", "-m", str(model), "--bin", str(ts_bin),
                               *args], capture_output=True, text=True, cwd=ROOT, env=os.environ.copy(), timeout=60)
    for args, message in ((["--replicas", "2", "--min-replicas", "1"], "not both"),
                          (["--target-ongoing-requests", "3"], "needs --min-replicas"),
                          (["--min-replicas", "3", "--max-replicas", "2"], "--min-replicas <= --max-replicas"),
                          (["--max-replicas", "2", "--target-ongoing-requests", "0"], "must be above 0"),
                          (["--port", "70000"], "--port must be in")):
        res = run(*args)
        assert res.returncode == 2 and message in res.stderr, (args, res.stderr)
    res = run("-m", "/nonexistent.gguf")
    assert res.returncode == 1 and res.stderr.strip() == "error: /nonexistent.gguf: no such model file"


@pytest.mark.runtime(30)
def test_serve_ray_command_serves_until_stopped(cluster, ts_bin, processes):
    import urllib.request

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tokensieve.serve_ray", "-m",
                             str(find_model("stories260K.gguf")), "--bin", str(ts_bin), "--ray", cluster.address,
                             "--port", str(port), "--", "-c", "256", "-t", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=os.environ.copy())
    processes.append(proc)
    deadline = time.monotonic() + 120
    for line in proc.stderr:  # Ray's notes, then ours
        if line.startswith("serving on") or time.monotonic() > deadline:
            break
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=30) as r:
        assert r.status == 200 and json.load(r)["data"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
