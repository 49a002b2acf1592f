"""Soak of `tokensieve serve` (bench/server_load.py --minutes M): C clients for M minutes, each
looping over a mix of valid requests (completions whole and streamed, chat, with and without
policies), malformed ones (bad JSON, wrong types, unknown fields and policies, out-of-range values)
and streams the client drops after the first chunk. The server's RSS is sampled every
--rss-every seconds.

Pass: no 5xx and no dropped connection on any request, every valid response complete (a whole body
with choices and a finish reason; a stream with a finish reason and [DONE]), every malformed request
a 4xx with a JSON error, RSS flat after the warm-up (the first fifth of the run): growth below
--rss-slack MiB, and the server exits 0 on SIGTERM. One JSON object on stdout; with --plot-rss, RSS
over time as a PNG.
"""
import argparse
import http.client
import json
import os
import random
import socket
import sys
import threading
import time

import server_load as sl

VALID_POLICIES = ["", "kvquant:bits=4,group=32", "h2o:keep=0.5", "zipvl:tau=0.975", "tokenfilter:ratio=0.3"]

# Malformed bodies: (raw bytes of the body, path). Each must come back as a 4xx with a JSON error.
MALFORMED = [
    (b"{", "/v1/completions"),
    (b"[1, 2]", "/v1/completions"),
    (b"\xff\xfe not utf-8", "/v1/completions"),
    (b'{"prompt": "a", "max_tokens": "many"}', "/v1/completions"),
    (b'{"prompt": "a", "max_tokens": -3}', "/v1/completions"),
    (b'{"prompt": "a", "max_tokens": 1e400}', "/v1/completions"),
    (b'{"prompt": "a", "temperature": 9}', "/v1/completions"),
    (b'{"prompt": "a", "policy": "nosuchpolicy:x=1"}', "/v1/completions"),
    (b'{"prompt": "a", "policy": "h2o:keep=7"}', "/v1/completions"),
    (b'{"prompt": "a", "policy": "h2o:keep=0.5\\n,x=1"}', "/v1/completions"),
    (b'{"prompt": [1, -5, 2]}', "/v1/completions"),
    (b'{"prompt": "a", "unknown_field": 1}', "/v1/completions"),
    (b'{"messages": "hello"}', "/v1/chat/completions"),
    (b'{"messages": [{"role": "user"}]}', "/v1/chat/completions"),
    (b'{"prompt": "a", "stop": ["a", "b", "c", "d", "e"]}', "/v1/completions"),
]


def request(host, port, path, body: bytes, timeout=600):
    """One POST: (status, response, None, connection to close), or (None, None, error text, None) when the
    connection failed."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp, None, conn
    except (OSError, http.client.HTTPException) as e:
        conn.close()
        return None, None, repr(e), None


def valid(host, port, rng, chat):
    stream = rng.random() < 0.5
    body = {"max_tokens": rng.randint(4, 32), "temperature": 0.7, "seed": rng.randrange(1 << 30), "stream": stream}
    policy = rng.choice(VALID_POLICIES)
    if policy:
        body["policy"] = policy
    if chat and rng.random() < 0.3:
        body["messages"] = [{"role": "user", "content": rng.choice(sl.PROMPTS)}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = rng.choice(sl.PROMPTS)
        path = "/v1/completions"
    status, resp, err, conn = request(host, port, path, json.dumps(body).encode())
    if err:
        return "valid", f"connection: {err}"
    try:
        if status != 200:
            return "valid", f"HTTP {status}: {resp.read()[:200]!r}"
        if not stream:
            out = json.loads(resp.read())
            choice = (out.get("choices") or [{}])[0]
            if choice.get("finish_reason") not in ("stop", "length"):
                return "valid", f"incomplete body: {str(out)[:200]}"
            return "valid", None
        finish, done = None, False
        for event in sl.sse_events(resp):
            if event is None:
                done = True
                break
            if "error" in event:
                return "valid", f"stream error: {event['error']}"
            finish = event["choices"][0].get("finish_reason") or finish
        if not done or finish not in ("stop", "length"):
            return "valid", f"incomplete stream (finish {finish}, [DONE] {done})"
        return "valid", None
    except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError) as e:
        return "valid", f"reading the response: {e!r}"
    finally:
        conn.close()


def malformed(host, port, rng):
    body, path = rng.choice(MALFORMED)
    status, resp, err, conn = request(host, port, path, body)
    if err:
        return "malformed", f"connection: {err}"
    try:
        text = resp.read()
        if not 400 <= status < 500:
            return "malformed", f"{body[:40]!r}: HTTP {status}"
        if "error" not in json.loads(text):
            return "malformed", f"{body[:40]!r}: no JSON error"
        return "malformed", None
    except (OSError, http.client.HTTPException, ValueError) as e:
        return "malformed", f"{body[:40]!r}: {e!r}"
    finally:
        conn.close()


def dropped(host, port, rng):
    """A stream the client abandons after its first chunk: the server must cancel it and go on."""
    body = {"prompt": rng.choice(sl.PROMPTS), "max_tokens": 64, "stream": True, "ignore_eos": True}
    status, resp, err, conn = request(host, port, "/v1/completions", json.dumps(body).encode())
    if err:
        return "dropped", f"connection: {err}"
    try:
        if status != 200:
            return "dropped", f"HTTP {status}"
        resp.readline()
        conn.sock.shutdown(socket.SHUT_RDWR)  # gone mid-stream, as a closed browser tab
        return "dropped", None
    except OSError as e:
        return "dropped", repr(e)
    finally:
        conn.close()


def client(host, port, seed, deadline, chat, out, lock):
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        r = rng.random()
        kind, error = (valid(host, port, rng, chat) if r < 0.6 else
                       malformed(host, port, rng) if r < 0.85 else dropped(host, port, rng))
        with lock:
            out[kind]["count"] += 1
            if error:
                out[kind]["errors"].append(error)


def soak(args) -> int:
    proc, host, port = sl.start_server(args.bin, args.model, args.threads, args.parallel,
                                       max(64, args.concurrency * 2), args.ctx)
    started = time.monotonic()
    deadline = started + 60 * args.minutes
    samples, stop = [], threading.Event()

    def sample_rss():
        while not stop.is_set():
            samples.append((time.monotonic() - started, sl.proc_status_kib(proc.pid, "VmRSS") / 1024))
            stop.wait(args.rss_every)

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    out = {k: {"count": 0, "errors": []} for k in ("valid", "malformed", "dropped")}
    lock = threading.Lock()
    clients = [threading.Thread(target=client, args=(host, port, 1000 + c, deadline, args.chat, out, lock))
               for c in range(args.concurrency)]
    for c in clients:
        c.start()
    while any(c.is_alive() for c in clients):
        time.sleep(10)
        with lock:
            done = sum(v["count"] for v in out.values())
        print(f"\r{(time.monotonic() - started) / 60:.1f} min, {done} requests", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    metrics = sl.scalar_metrics(host, port)
    stop.set()
    sampler.join()
    exit_code = sl.stop_server(proc)

    warm = [s for s in samples if s[0] >= 0.2 * 60 * args.minutes]
    growth = warm[-1][1] - warm[0][1] if len(warm) > 1 else 0.0
    report = {
        "minutes": args.minutes, "clients": args.concurrency, "parallel": args.parallel, "threads": args.threads,
        "model": os.path.basename(args.model),
        "requests": {k: v["count"] for k, v in out.items()},
        "failures": {k: len(v["errors"]) for k, v in out.items()},
        "errors": sorted({e for v in out.values() for e in v["errors"]})[:10],
        "server_cancelled_jobs": metrics.get("tokensieve_jobs_cancelled_total"),
        "server_generated_tokens": metrics.get("tokensieve_generated_tokens_total"),
        "rss_mib_after_warmup": warm[0][1] if warm else None, "rss_mib_end": samples[-1][1],
        "rss_mib_peak": max(s[1] for s in samples), "rss_growth_after_warmup_mib": round(growth, 2),
        "server_exit_code": exit_code,
    }
    print(json.dumps(report))
    if args.plot_rss:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 3.2))
        ax.plot([s[0] / 60 for s in samples], [s[1] for s in samples], lw=1.2)
        ax.axvline(0.2 * args.minutes, color="grey", ls=":", label="end of warm-up")
        ax.set_xlabel("minutes")
        ax.set_ylabel("server RSS (MiB)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{report['model']}: {args.concurrency} clients, valid, malformed and dropped requests",
                     fontsize=9)
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(args.plot_rss, dpi=120)
    ok = (not any(report["failures"].values()) and exit_code == 0 and growth < args.rss_slack)
    return 0 if ok else 1
