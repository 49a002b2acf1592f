#!/usr/bin/env python3
"""Bounded load test of `tokensieve serve` on loopback: N requests from C concurrent clients, a mix
of streaming and whole-body completions, chat when the model has a template. Reports failures,
latency percentiles (whole request; first token for streams), throughput and the server's RSS
before and after, as one JSON object on stdout (progress on stderr).

  bench/server_load.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --requests 300 --concurrency 16 \\
      [--parallel 4] [--threads 1] [--max-tokens 32] [--rounds 1] [--bin build/bin/tokensieve]

--rounds R sends the requests R times to the same server and reports its RSS after each round
(a leak shows as growth after the first round, which only touches the slots' caches).

Only 127.0.0.1 is targeted; the server is started and stopped (SIGTERM, must exit 0) by this script.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

PROMPTS = ["Once upon a time", "The best way to learn a language is", "Write a short note about the sea.",
           "List three colours:", "In a small village there lived", "The recipe starts with"]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def start_server(args):
    cmd = [args.bin, "serve", "-m", args.model, "--port", "0", "-t", str(args.threads), "--parallel",
           str(args.parallel), "--queue", str(max(64, args.concurrency * 2)), "--ctx", str(args.ctx)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    if "listening on http://" not in line:
        proc.kill()
        sys.exit(f"server did not start: {line}{proc.stderr.read()}")
    threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
    host_port = line.split("http://")[1].split()[0]
    host, port = host_port.rsplit(":", 1)
    assert host.startswith("127."), "loopback only"
    return proc, host, int(port)


def one_request(host, port, i, args, chat):
    rng = random.Random(i)
    stream = i % 2 == 0
    use_chat = chat and i % 3 == 0
    body = {"max_tokens": rng.randint(args.max_tokens // 2, args.max_tokens), "temperature": 0.7, "seed": i,
            "stream": stream}
    if use_chat:
        body["messages"] = [{"role": "user", "content": rng.choice(PROMPTS)}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = rng.choice(PROMPTS)
        path = "/v1/completions"
    start = time.perf_counter()
    first = None
    conn = http.client.HTTPConnection(host, port, timeout=600)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return {"ok": False, "error": f"HTTP {resp.status}: {resp.read()[:200]!r}"}
        if stream:
            done = False
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                event = json.loads(line[6:])
                if "error" in event:
                    return {"ok": False, "error": event["error"]["message"]}
                if first is None:
                    first = time.perf_counter() - start
            if not done:
                return {"ok": False, "error": "stream ended without [DONE]"}
        else:
            out = json.loads(resp.read())
            if "error" in out or not out.get("choices"):
                return {"ok": False, "error": str(out)[:200]}
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as e:
        return {"ok": False, "error": repr(e)}
    finally:
        conn.close()
    return {"ok": True, "latency": time.perf_counter() - start, "first": first, "stream": stream}


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", default="build/bin/tokensieve")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--chat", action="store_true", help="mix in chat completions (model needs a chat template)")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()

    proc, host, port = start_server(args)
    rss_before = rss_kib(proc.pid)
    results = []
    rss_rounds = []
    started = time.perf_counter()
    total = args.requests * args.rounds
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        for r in range(args.rounds):
            futures = [pool.submit(one_request, host, port, i, args, args.chat) for i in range(args.requests)]
            for f in concurrent.futures.as_completed(futures):
                results.append(f.result())
                if len(results) % 20 == 0 or len(results) == total:
                    print(f"\r{len(results)}/{total} requests", end="", file=sys.stderr, flush=True)
            rss_rounds.append(rss_kib(proc.pid) / 1024)
    print(file=sys.stderr)
    wall = time.perf_counter() - started
    rss_after = rss_kib(proc.pid)
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", "/metrics")
    metrics = conn.getresponse().read().decode()
    conn.close()
    generated = next(float(l.split()[1]) for l in metrics.splitlines() if l.startswith("tokensieve_generated_tokens_total "))
    proc.send_signal(signal.SIGTERM)
    exit_code = proc.wait(timeout=120)

    ok = [r for r in results if r["ok"]]
    latencies = [r["latency"] for r in ok]
    firsts = [r["first"] for r in ok if r.get("first") is not None]
    errors = sorted({r["error"] for r in results if not r["ok"]})
    report = {
        "requests": total, "concurrency": args.concurrency, "parallel": args.parallel, "threads": args.threads,
        "max_tokens": args.max_tokens, "model": os.path.basename(args.model),
        "failures": len(results) - len(ok), "errors": errors[:5],
        "streamed": sum(1 for r in ok if r["stream"]),
        "latency_p50_s": percentile(latencies, 50), "latency_p99_s": percentile(latencies, 99),
        "latency_mean_s": statistics.mean(latencies) if latencies else None,
        "first_token_p50_s": percentile(firsts, 50), "first_token_p99_s": percentile(firsts, 99),
        "wall_s": wall, "generated_tokens": generated, "tokens_per_s": generated / wall,
        "rss_before_mib": rss_before / 1024, "rss_after_mib": rss_after / 1024, "rss_after_each_round_mib": rss_rounds, "server_exit_code": exit_code,
    }
    print(json.dumps(report))
    return 0 if report["failures"] == 0 and exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
