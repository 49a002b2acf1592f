"""A `tokensieve sweep` spread over a Ray cluster: the same grid, cache and table, cells split into shards.

    python -m tokensieve.sweep SPEC.json -o DIR --ray local|ADDRESS [--shards N] [--workers W] [--threads T]

SPEC is the JSON grid `tokensieve sweep --spec` reads; DIR gets the same cells/ cache and sweep.csv. Each
cell (one `eval` or `ppl` command) is split into N shards of its documents or perplexity windows
(`--shard I/N`); the shards run as Ray tasks on W engine workers (actors, one engine process each, every
model loaded once per worker, T threads each), and the driver merges them into exactly the cell file a
single-machine sweep writes: the same output and per-document samples bit for bit (its "seconds" are the
shards' summed compute time). Finished shards are kept in DIR/cells/shards/, so a rerun after a crash or a
lost worker recomputes nothing that finished; a failed shard is retried (--retries), then reported.

Workers read the files a cell reads (the model, the data directory, files named by the command such as a
policy's profile=) at the same paths as the driver (a shared file system: on one machine, the local one);
each checks their sha256 against the driver's before its first shard. A cached shard counts only for the
same command on files with the same sha256.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import Model
from . import _tokensieve as _ext


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def inputs_of(cell: dict) -> list[str]:
    """The files a cell reads: those its command names and every file of the data directory it reads."""
    files = list(cell["files"])
    if cell["data_dir"] and os.path.isdir(cell["data_dir"]):
        files += sorted(str(p) for p in Path(cell["data_dir"]).rglob("*") if p.is_file())
    return files


class Manifest:
    """sha256 of the files the cells read, each hashed once."""

    def __init__(self, plan: list[dict]):
        self.digests: dict[str, str] = {}
        self.cells: dict[str, str] = {}  # cell key -> one digest of all its inputs
        for cell in plan:
            files = inputs_of(cell)
            for f in files:
                if f not in self.digests:
                    if not os.path.isfile(f):
                        raise _ext.Error(f"{f}: no such file (read by the cell {label(cell)})")
                    self.digests[f] = sha256(f)
            text = json.dumps([(f, self.digests[f]) for f in files])
            self.cells[cell["key"]] = hashlib.sha256(text.encode()).hexdigest()


class EngineWorker:
    """One engine per worker process: models loaded once, shards run in turn."""

    def __init__(self, cwd: str, files: dict[str, str], data_dir: str | None, threads: int):
        os.chdir(cwd)  # the cells' relative paths mean what they mean to the driver
        # A command without --data-dir reads the driver's default directory, not this node's.
        if data_dir is None:
            os.environ.pop("TS_DATA_DIR", None)
        else:
            os.environ["TS_DATA_DIR"] = data_dir
        for path, digest in files.items():
            if not os.path.exists(path):
                raise FileNotFoundError(f"{path}: not on this worker's file system")
            if sha256(path) != digest:
                raise ValueError(f"{path}: sha256 differs from the driver's copy")
        self.threads = threads
        self.models: dict[str, Model] = {}

    def run(self, command: list[str], model: str, index: int, count: int) -> tuple[str, str, float]:
        """Shard index of count: (output JSON text, samples JSON Lines, seconds)."""
        if model not in self.models:
            self.models[model] = Model(model, threads=self.threads)
        with tempfile.TemporaryDirectory(prefix="tokensieve-shard-") as tmp:
            samples = os.path.join(tmp, "samples.jsonl")
            start = time.monotonic()
            output = _ext.run_cell_shard(self.models[model]._model, command, index, count, self.threads, samples)
            seconds = time.monotonic() - start
            return output, Path(samples).read_text(), seconds


def label(cell: dict) -> str:
    return f"{cell['policy']} / {cell['setting']} / {cell['task']}"


@dataclass
class Cell:
    spec: dict  # the plan's row: key, command, policy, setting, task, model, files, data_dir
    shards: int
    inputs: str  # the digest of the files it reads: a shard cached from other files is run again
    done: dict[int, tuple[str, str, float]] = field(default_factory=dict)  # index -> (output, samples, seconds)


def shard_paths(out_dir: str, cell: Cell, index: int) -> tuple[Path, Path]:
    stem = Path(out_dir) / "cells" / "shards" / f"{cell.spec['key']}.{index}-of-{cell.shards}"
    return stem.with_suffix(stem.suffix + ".json"), stem.with_suffix(stem.suffix + ".samples.jsonl")


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def load_shard(out_dir: str, cell: Cell, index: int) -> bool:
    """A finished shard from the cache, when it is there whole, for this command and these input files."""
    result, samples = shard_paths(out_dir, cell, index)
    try:
        saved = json.loads(result.read_text())
        if saved["command"] != cell.spec["command"] or saved["inputs"] != cell.inputs or not samples.exists():
            return False
        json.loads(saved["output"])  # whole
        cell.done[index] = (saved["output"], str(samples), float(saved["seconds"]))
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False


def save_shard(out_dir: str, cell: Cell, index: int, output: str, samples_text: str, seconds: float) -> None:
    result, samples = shard_paths(out_dir, cell, index)
    write_atomically(samples, samples_text)  # first: a result file means its samples are whole
    write_atomically(result, json.dumps({"command": cell.spec["command"], "inputs": cell.inputs, "output": output,
                                         "seconds": seconds}))
    cell.done[index] = (output, str(samples), seconds)


def finish(out_dir: str, cell: Cell) -> None:
    outputs = [cell.done[i][0] for i in range(cell.shards)]
    samples = [cell.done[i][1] for i in range(cell.shards)]
    _ext.finish_cell(out_dir, cell.spec["command"], outputs, samples, sum(cell.done[i][2] for i in range(cell.shards)))


def eta(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def connect(ray, address: str) -> None:
    """Ray started here ('local') or reached at address; when this process already has Ray, that cluster."""
    if ray.is_initialized():
        return
    try:
        ray.init(address=None if address == "local" else address, log_to_driver=False, include_dashboard=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise _ext.Error(f"cannot start or reach Ray at {address}: {one_line(e)}") from None


def worker_slots(ray, threads: int) -> int:
    """How many workers of `threads` CPUs the cluster's nodes hold (a worker cannot span two nodes)."""
    cpus = [int(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
    if not cpus or threads > max(cpus):
        raise _ext.Error(f"--threads {threads}: no node of the cluster has {threads} CPUs "
                         f"(the largest has {max(cpus, default=0)})")
    return sum(c // threads for c in cpus)


class WorkerPool:
    """Engine workers; a worker that died (its process killed, its node lost) is replaced by a new one."""

    def __init__(self, ray, size: int, threads: int, manifest: Manifest):
        # Ray neither restarts workers nor retries their calls: run() retries a shard itself, so a shard
        # that kills its engine is tried retries + 1 times in all, each time on a fresh worker.
        self.worker_class = ray.remote(num_cpus=threads, max_restarts=0, max_task_retries=0)(EngineWorker)
        self.ray = ray
        data_dir = os.environ.get("TS_DATA_DIR") or None
        self.args = (os.getcwd(), manifest.digests, data_dir, threads)
        self.idle = [self.worker_class.remote(*self.args) for _ in range(size)]

    def replace(self, worker) -> None:
        self.ray.kill(worker)
        self.idle.append(self.worker_class.remote(*self.args))


def run(spec: str, out_dir: str, ray_address: str, shards: int = 4, workers: int = 0, threads: int = 1,
        retries: int = 2, log=None) -> dict:
    """Runs the sweep; returns {"csv", "cells", "ran", "cached", "shards_run", "shards_cached", "failed"}."""
    log = log or sys.stderr
    try:
        import ray  # only the distributed sweep needs it
    except ImportError:
        raise _ext.Error("the distributed sweep needs Ray: pip install 'ray[serve]'") from None

    plan = _ext.sweep_plan(spec)
    try:
        (Path(out_dir) / "cells" / "shards").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _ext.Error(f"{out_dir}: cannot make the output directory: {e.strerror}") from None
    to_run = [c for c in plan if not _ext.cell_cached(out_dir, c["command"])]
    manifest = Manifest(to_run)
    cells = [Cell(c, shards, manifest.cells[c["key"]]) for c in to_run]
    pending = [(cell, i) for cell in cells for i in range(shards) if not load_shard(out_dir, cell, i)]
    shards_cached = len(cells) * shards - len(pending)
    failed: list[str] = []
    ran_shards = 0
    if pending:
        connect(ray, ray_address)
        slots = worker_slots(ray, threads)
        if workers > slots:
            raise _ext.Error(f"--workers {workers}: the cluster holds {slots} workers of {threads} threads")
        pool = WorkerPool(ray, min(workers or slots, len(pending)), threads, manifest)
        print(f"sweep: {len(cells)} cells to run, {len(pending)} shards on {len(pool.idle)} workers "
              f"({shards_cached} shards cached)", file=log, flush=True)
        attempts: dict[tuple[str, int], int] = {}
        running: dict = {}  # ObjectRef -> (cell, index, worker)
        start = time.monotonic()
        while pending or running:
            while pool.idle and pending:
                cell, i = pending.pop(0)
                worker = pool.idle.pop(0)
                ref = worker.run.remote(cell.spec["command"], cell.spec["model"], i, shards)
                running[ref] = (cell, i, worker)
            [ref], _ = ray.wait(list(running), num_returns=1)
            cell, i, worker = running.pop(ref)
            try:
                output, samples_text, seconds = ray.get(ref)
            except ray.exceptions.RayError as e:
                if isinstance(e, ray.exceptions.RayActorError):
                    pool.replace(worker)  # the worker is gone: its shard goes to another
                else:
                    pool.idle.append(worker)  # the engine refused the shard; the worker is fine
                key = (cell.spec["key"], i)
                attempts[key] = attempts.get(key, 0) + 1
                what = f"shard {i}/{shards} of {label(cell.spec)}"
                if attempts[key] <= retries:
                    pending.append((cell, i))
                    print(f"sweep: {what} failed, retrying: {one_line(e)}", file=log, flush=True)
                else:
                    failed.append(f"{what}: {one_line(e)}")
                    print(f"sweep: {failed[-1]}", file=log, flush=True)
                continue
            pool.idle.append(worker)
            save_shard(out_dir, cell, i, output, samples_text, seconds)
            ran_shards += 1
            if len(cell.done) == shards:
                finish(out_dir, cell)
            done_cells = sum(len(c.done) == shards for c in cells)
            left = len(pending) + len(running)
            per_shard = (time.monotonic() - start) / ran_shards
            print(f"sweep: cells {done_cells}/{len(cells)}, shards {ran_shards + shards_cached}/{len(cells) * shards}"
                  f", ETA {eta(per_shard * left)}", file=log, flush=True)
    for cell in cells:  # cells whose shards were all cached, but not yet merged
        if len(cell.done) == shards and not _ext.cell_cached(out_dir, cell.spec["command"]):
            finish(out_dir, cell)
    result = {"cells": len(plan), "ran": len(cells), "cached": len(plan) - len(cells), "shards_run": ran_shards,
              "shards_cached": shards_cached, "failed": failed, "csv": None}
    if not failed:
        result["csv"] = _ext.write_sweep_table(spec, out_dir)
    return result


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[-1] if text else type(e).__name__


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tokensieve.sweep", description=__doc__.split("\n\n")[0])
    p.add_argument("spec", help="the JSON grid (as `tokensieve sweep --spec` reads it)")
    p.add_argument("-o", "--out", required=True, help="output directory: cells/ (the cache) and sweep.csv")
    p.add_argument("--ray", required=True, metavar="local|ADDRESS",
                   help="'local': start Ray on this machine; else a cluster's address (host:port or ray://...)")
    p.add_argument("--shards", type=int, default=4, help="shards per cell (default 4)")
    p.add_argument("--workers", type=int, default=0, help="engine workers (default: the cluster's CPUs / threads)")
    p.add_argument("--threads", type=int, default=1, help="threads of each worker's engine (default 1)")
    p.add_argument("--retries", type=int, default=2, help="times a failed shard (or one on a lost worker) is retried")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    a = p.parse_args(argv)
    for name, value, low in (("--shards", a.shards, 1), ("--workers", a.workers, 0), ("--threads", a.threads, 1),
                             ("--retries", a.retries, 0)):
        if value < low:
            p.error(f"{name} must be at least {low}")
    if not os.path.isfile(a.spec):
        p.error(f"{a.spec}: no such file")
    try:
        r = run(a.spec, a.out, a.ray, a.shards, a.workers, a.threads, a.retries)
    except _ext.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(r))
    elif r["csv"]:
        print(f"{r['csv']}: {r['cells']} cells ({r['ran']} run, {r['cached']} from the cache; "
              f"{r['shards_run']} shards run, {r['shards_cached']} from the cache)")
    if r["failed"]:
        print(f"error: {len(r['failed'])} shard(s) failed; rerun to retry them (finished shards are kept)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
