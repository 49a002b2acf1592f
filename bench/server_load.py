#!/usr/bin/env python3
"""Load tests of `tokensieve serve` on loopback. Two modes:

Mixed load (default): N requests from C concurrent clients, a mix of streaming and whole-body
completions, chat when the model has a template. Reports failures, latency percentiles (whole
request; first token for streams), throughput and the server's RSS before and after, as one JSON
object on stdout (progress on stderr).

  bench/server_load.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --requests 300 --concurrency 16 \\
      [--parallel 4] [--threads 1] [--max-tokens 32] [--rounds 1] [--bin build/bin/tokensieve]

--rounds R sends the requests R times to the same server and reports its RSS after each round
(a leak shows as growth after the first round, which only touches the slots' caches).

Throughput scaling (--streams): how continuous batching scales with concurrent streams.

  bench/server_load.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --streams 1,2,4,8,16 --threads 2 \\
      [--prompt-tokens 32] [--gen-tokens 64] [--rounds-per-stream 2] [--policy-mix] \\
      [--plot scaling.png] [--json-out scaling.json]

For each N a fresh server with --parallel N (one slot per client) gets one warm-up request, then N
client threads of the `openai` package each stream --rounds-per-stream completions at temperature 0
with ignore_eos, so every response is exactly --gen-tokens tokens. Every request has its own prompt
(request k: a fixed story rotated by k words, cut to --prompt-tokens through the server's /tokenize
and /detokenize), so a slot's cached prefix from the previous request saves next to nothing and the
time to first token includes a real prefill. Per N: aggregate generated tokens/s over the clients' wall
time, time to first text chunk and gaps between text chunks (p50/p99), the server's peak RSS
(VmHWM), and from /metrics over the same phase the mean sequences and rows per engine step and the
mean step time (sequences per step > 1 is the proof that requests were batched). One JSON object per
N on stdout, a markdown table on stderr, optionally a PNG plot and a JSON file of all points.

--policy-mix gives request k the policy POLICY_MIX[k % len] (OrthoRank only on models with at least
8 layers) and first runs every request alone on an idle --parallel 1 server; each point then counts
the completed streams whose text differs from that run (`mismatches`, expected 0: a batched step
must give each sequence the result it gets alone; failed streams count under `failures`).

Soak (--minutes M): --concurrency clients for M minutes mixing valid, malformed and dropped requests;
pass/fail and the RSS record as described in bench/server_soak.py.

  bench/server_load.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --minutes 10 --concurrency 16 \\
      [--parallel 4] [--threads 2] [--chat] [--plot-rss rss.png]

Only 127.0.0.1 is targeted; every server is started and stopped (SIGTERM, must exit 0) by this script.
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
from typing import Any

PROMPTS = ["Once upon a time", "The best way to learn a language is", "Write a short note about the sea.",
           "List three colours:", "In a small village there lived", "The recipe starts with"]

# Plain words that every tokenizer (down to stories260K's 512 pieces) encodes without surprises.
STORY = ("Once upon a time there was a little girl named Lily. She lived in a small house near the park with "
         "her mom, her dad and a happy brown dog called Max. Every morning Lily and Max ran to the big tree by "
         "the pond to look at the ducks. One day Lily saw a red ball floating on the water. She wanted to get "
         "it, but the water was deep and cold. Max barked and jumped in, and he swam to the ball and brought "
         "it back to her. Lily hugged the wet dog and said thank you. Then they walked home together, and mom "
         "made warm soup for everyone because the day had been long and full of fun.")

# The rotation of --policy-mix: dense, then one member of each policy family the server batches.
POLICY_MIX = ["", "orthorank:layers=3,5,7", "kvquant:bits=4,group=32", "zipvl:tau=0.975", "h2o:keep=0.5",
              "tokenfilter:ratio=0.3"]
ORTHORANK_MIN_LAYERS = 8  # its layers=3,5,7 must exist


def proc_status_kib(pid: int, field: str) -> int:
    """A memory field of /proc/PID/status in KiB: VmRSS now, VmHWM the peak since start."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(f"{field} not in /proc/{pid}/status")


def start_server(bin_path: str, model: str, threads: int, parallel: int, queue: int,
                 ctx: int) -> tuple[subprocess.Popen, str, int]:
    """Start `tokensieve serve` on a free loopback port and return it with its host and port."""
    cmd = [bin_path, "serve", "-m", model, "--port", "0", "-t", str(threads), "--parallel", str(parallel),
           "--queue", str(queue), "--ctx", str(ctx)]
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


def stop_server(proc: subprocess.Popen) -> int:
    """SIGTERM and the exit code, which must be 0: running requests finish, nothing crashes on the way out."""
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=120)


def http_call(host: str, port: int, method: str, path: str, body: Any = None) -> str:
    """One plain request (no openai client: these are the server's non-OpenAI routes); the body text."""
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        conn.request(method, path, None if body is None else json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        text = resp.read().decode()
        if resp.status != 200:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status}: {text[:200]}")
        return text
    finally:
        conn.close()


def scalar_metrics(host: str, port: int) -> dict[str, float]:
    """The unlabelled samples of /metrics (counters, gauges, histogram _sum and _count) by name."""
    out = {}
    for line in http_call(host, port, "GET", "/metrics").splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.split()
            out[name] = float(value)
    return out


def sse_events(resp):
    """The JSON events of a server-sent-event stream, then None for its [DONE] (missing when the stream was cut)."""
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            yield None
            return
        yield json.loads(line[6:])


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
            for event in sse_events(resp):
                if event is None:
                    done = True
                    break
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


def to_ms(seconds: float | None) -> float | None:
    """Seconds as rounded milliseconds for the report (None stays None: no sample)."""
    return None if seconds is None else round(seconds * 1000, 2)


def mixed_load(args: argparse.Namespace) -> int:
    """The default mode: a bounded mixed load on one server (see the module docstring)."""
    proc, host, port = start_server(args.bin, args.model, args.threads, args.parallel, max(64, args.concurrency * 2),
                                    args.ctx)
    rss_before = proc_status_kib(proc.pid, "VmRSS")
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
            rss_rounds.append(proc_status_kib(proc.pid, "VmRSS") / 1024)
    print(file=sys.stderr)
    wall = time.perf_counter() - started
    rss_after = proc_status_kib(proc.pid, "VmRSS")
    generated = scalar_metrics(host, port)["tokensieve_generated_tokens_total"]
    exit_code = stop_server(proc)

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


def parse_streams(text: str) -> list[int]:
    """--streams as sorted distinct counts, so the N=1 baseline (when asked for) is measured first."""
    try:
        streams = sorted({int(x) for x in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--streams wants a comma-separated list of integers, not {text!r}")
    if streams[0] < 1:
        raise argparse.ArgumentTypeError("--streams counts must be at least 1")
    return streams


def model_layers(bin_path: str, model: str) -> int:
    """Layer count from `tokensieve info --json`, which decides whether OrthoRank's layers exist."""
    out = subprocess.run([bin_path, "info", "--json", "-m", model], capture_output=True, text=True, check=True)
    return int(json.loads(out.stdout)["n_layers"])


def build_prompts(host: str, port: int, count: int, prompt_tokens: int) -> tuple[list[str], list[int]]:
    """`count` distinct prompts of about `prompt_tokens` tokens (BOS included when the model adds one) and
    their exact lengths as the server encodes them. Prompt k is STORY rotated by k words: distinct
    beginnings defeat prefix reuse between requests, which would otherwise hide the prefill."""
    def tokenize(text: str, special: bool) -> list[int]:
        return json.loads(http_call(host, port, "POST", "/tokenize",
                                    {"prompt": text, "add_special_tokens": special}))["tokens"]

    words = STORY.split()
    if count > len(words):
        sys.exit(f"{count} requests need more distinct prompts than the story's {len(words)} words give")
    special = len(tokenize("a", True)) - len(tokenize("a", False))
    copies = 1 + prompt_tokens // max(1, len(tokenize(STORY, False)))
    prompts, lengths = [], []
    for k in range(count):
        text = " ".join((words[k:] + words[:k]) * copies)
        ids = tokenize(text, False)[:max(1, prompt_tokens - special)]
        prompt = json.loads(http_call(host, port, "POST", "/detokenize", {"tokens": ids}))["prompt"]
        prompts.append(prompt)
        lengths.append(len(tokenize(prompt, True)))
    return prompts, lengths


def stream_completion(client: Any, model_id: str, prompt: str, gen_tokens: int, policy: str | None) -> dict:
    """One streamed greedy completion of exactly gen_tokens tokens (ignore_eos), timed chunk by chunk.

    TTFT runs from the call to the first chunk carrying text; the gaps are between successive text chunks
    (the server sends one event per token, except for tokens that complete no UTF-8 character)."""
    import openai  # here, not at the top: the mixed-load mode runs without the openai package

    extra: dict[str, Any] = {"ignore_eos": True}
    if policy is not None:
        extra["policy"] = policy
    pieces: list[str] = []
    gaps: list[float] = []
    ttft = last = None
    finish = None
    start = time.perf_counter()
    try:
        stream = client.completions.create(model=model_id, prompt=prompt, max_tokens=gen_tokens, temperature=0,
                                           stream=True, extra_body=extra)
        for chunk in stream:
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            finish = choice.finish_reason or finish
            if not choice.text:
                continue
            now = time.perf_counter()
            if ttft is None:
                ttft = now - start
            else:
                gaps.append(now - last)
            last = now
            pieces.append(choice.text)
    except (openai.OpenAIError, OSError) as e:
        return {"ok": False, "error": repr(e)[:200]}
    if finish != "length":
        return {"ok": False, "error": f"finish_reason {finish!r}, expected 'length'"}
    return {"ok": True, "ttft": ttft, "gaps": gaps, "chunks": len(pieces), "text": "".join(pieces)}


def openai_client(host: str, port: int) -> Any:
    """A client per thread (no shared connection pool between the streams), without retries that would
    hide failures."""
    import openai

    return openai.OpenAI(base_url=f"http://{host}:{port}/v1", api_key="x", max_retries=0, timeout=600)


def run_clients(host: str, port: int, n: int, args: argparse.Namespace, prompts: list[str],
                policies: list[str | None]) -> tuple[list[dict], float]:
    """N client threads released together by a barrier; client c sends requests c, c + N, c + 2N, ...
    so request k (its prompt and policy) is the same whatever N is and can be compared across points.
    Returns the results by request index and the wall time from release to the last response."""
    model_id = os.path.basename(args.model)
    results: list[dict] = [{"ok": False, "error": "client thread died"}] * (n * args.rounds_per_stream)
    barrier = threading.Barrier(n + 1)

    def client_thread(c: int) -> None:
        client = openai_client(host, port)
        barrier.wait()
        for r in range(args.rounds_per_stream):
            k = r * n + c
            results[k] = stream_completion(client, model_id, prompts[k], args.gen_tokens, policies[k])
        client.close()

    threads = [threading.Thread(target=client_thread, args=(c,)) for c in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return results, time.perf_counter() - start


def scaling_point(n: int, args: argparse.Namespace, prompts: list[str], prompt_lengths: list[int],
                  policies: list[str | None], references: list[str] | None) -> dict:
    """One N: a fresh --parallel N server, a warm-up request, the N-client phase, its measurements."""
    proc, host, port = start_server(args.bin, args.model, args.threads, n, 64, args.ctx)
    try:
        warm = openai_client(host, port)
        # "List three colours:" shares no prefix with the story prompts that the slot could reuse.
        warmup = stream_completion(warm, os.path.basename(args.model), PROMPTS[3], args.gen_tokens, None)
        warm.close()
        before = scalar_metrics(host, port)
        results, wall = run_clients(host, port, n, args, prompts, policies)
        after = scalar_metrics(host, port)
        peak_rss_kib = proc_status_kib(proc.pid, "VmHWM")
    finally:
        exit_code = stop_server(proc)

    def delta(name: str) -> float:
        return after[name] - before[name]

    ok = [r for r in results if r["ok"]]
    ttfts = [r["ttft"] for r in ok]
    gaps = [g for r in ok for g in r["gaps"]]
    steps = int(delta("tokensieve_batch_sequences_count"))
    generated = int(delta("tokensieve_generated_tokens_total"))
    mismatches = (sum(1 for k, r in enumerate(results) if r["ok"] and r["text"] != references[k])
                  if references is not None else None)
    return {
        "model": os.path.basename(args.model), "streams": n, "threads": args.threads,
        "prompt_tokens": statistics.mean(prompt_lengths[:len(results)]), "gen_tokens": args.gen_tokens,
        "requests": len(results), "failures": len(results) - len(ok) + int(not warmup["ok"]),
        "errors": sorted({r["error"] for r in results + [warmup] if not r["ok"]})[:5],
        "generated_tokens": generated, "expected_tokens": len(results) * args.gen_tokens,
        "streamed_chunks": sum(r["chunks"] for r in ok), "wall_s": round(wall, 3),
        "tokens_per_s": round(generated / wall, 2),
        "ttft_p50_ms": to_ms(percentile(ttfts, 50)), "ttft_p99_ms": to_ms(percentile(ttfts, 99)),
        "itl_p50_ms": to_ms(percentile(gaps, 50)), "itl_p99_ms": to_ms(percentile(gaps, 99)),
        "peak_rss_mib": round(peak_rss_kib / 1024, 1),
        "steps": steps,
        "mean_batch_sequences": round(delta("tokensieve_batch_sequences_sum") / steps, 3) if steps else None,
        "mean_batch_rows": round(delta("tokensieve_batch_rows_sum") / steps, 3) if steps else None,
        "mean_step_ms": to_ms(delta("tokensieve_step_seconds_sum") / steps) if steps else None,
        "prefix_hits": int(delta("tokensieve_prefix_hits_total")),
        "prefix_tokens_reused": int(delta("tokensieve_prefix_tokens_reused_total")),
        "policies": sorted({p for p in policies[:len(results)] if p is not None}) or None,
        "mismatches": mismatches, "server_exit_code": exit_code,
    }


def print_table(rows: list[dict]) -> None:
    """The markdown table on stderr; ×N=1 is the aggregate rate over the N=1 point's (– without one)."""
    base = next((r["tokens_per_s"] for r in rows if r["streams"] == 1), None)

    def fmt(x: float | None) -> str:
        return "–" if x is None else f"{x:g}"

    lines = ["| N | agg tok/s | ×N=1 | TTFT p50/p99 ms | ITL p50/p99 ms | peak RSS MiB | seq/step | step ms |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        speedup = f"{r['tokens_per_s'] / base:.2f}" if base else "–"
        lines.append(f"| {r['streams']} | {r['tokens_per_s']:.1f} | {speedup} | {fmt(r['ttft_p50_ms'])} / "
                     f"{fmt(r['ttft_p99_ms'])} | {fmt(r['itl_p50_ms'])} / {fmt(r['itl_p99_ms'])} | "
                     f"{r['peak_rss_mib']:.1f} | {fmt(r['mean_batch_sequences'])} | {fmt(r['mean_step_ms'])} |")
    print("\n".join(lines), file=sys.stderr)
    if rows[0]["mismatches"] is not None:
        print(f"policy mix: {sum(r['mismatches'] for r in rows)} of {sum(r['requests'] for r in rows)} streams "
              "differ from the same request alone on an idle server", file=sys.stderr)


def plot(rows: list[dict], path: str) -> None:
    """Aggregate tokens/s (left axis) and p99 inter-token latency (right axis) against N, log2 N axis."""
    import matplotlib  # only with --plot; Agg draws without a display
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["streams"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.plot(ns, [r["tokens_per_s"] for r in rows], "o-", color="tab:blue", label="aggregate tokens/s")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("concurrent streams N (--parallel N)")
    ax.set_ylabel("aggregate generated tokens/s", color="tab:blue")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    ax2.plot(ns, [r["itl_p99_ms"] for r in rows], "s--", color="tab:red", label="p99 inter-token latency")
    ax2.set_ylabel("p99 inter-token latency (ms)", color="tab:red")
    ax2.set_ylim(bottom=0)
    r0 = rows[0]
    mix = ", policy mix" if r0["mismatches"] is not None else ""
    ax.set_title(f"{r0['model']}, -t {r0['threads']}, prompt ≈{r0['prompt_tokens']:.0f}, gen {r0['gen_tokens']}{mix}",
                 fontsize=10)
    fig.legend(loc="upper left", bbox_to_anchor=(0.12, 0.88), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def scaling(args: argparse.Namespace) -> int:
    """The --streams mode (see the module docstring)."""
    count = max(args.streams) * args.rounds_per_stream
    policies: list[str | None] = [None] * count
    if args.policy_mix:
        orthorank_ok = model_layers(args.bin, args.model) >= ORTHORANK_MIN_LAYERS
        mix = [p for p in POLICY_MIX if orthorank_ok or not p.startswith("orthorank")]
        policies = [mix[k % len(mix)] for k in range(count)]
    # The idle server: it tokenizes the prompts and, with --policy-mix, runs every request alone.
    proc, host, port = start_server(args.bin, args.model, args.threads, 1, 64, args.ctx)
    try:
        prompts, lengths = build_prompts(host, port, count, args.prompt_tokens)
        if max(lengths) + args.gen_tokens > args.ctx:
            sys.exit(f"--ctx {args.ctx} cannot hold {max(lengths)} prompt + {args.gen_tokens} generated tokens")
        references = None
        if args.policy_mix:
            client = openai_client(host, port)
            alone = [stream_completion(client, os.path.basename(args.model), prompts[k], args.gen_tokens,
                                       policies[k]) for k in range(count)]
            client.close()
            failed = [r["error"] for r in alone if not r["ok"]]
            if failed:
                sys.exit(f"reference run failed: {failed[:3]}")
            references = [r["text"] for r in alone]
    finally:
        idle_exit = stop_server(proc)
    if idle_exit != 0:
        sys.exit(f"the idle server exited {idle_exit}")

    rows = []
    for n in args.streams:
        print(f"N={n} ...", file=sys.stderr, flush=True)
        rows.append(scaling_point(n, args, prompts, lengths, policies, references))
        print(json.dumps(rows[-1]), flush=True)
    print_table(rows)
    if args.plot:
        plot(rows, args.plot)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [r for r in rows if r["failures"] or r["server_exit_code"] != 0 or r["mismatches"]
           or r["generated_tokens"] != r["expected_tokens"]]
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", default="build/bin/tokensieve")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=512)
    mixed = ap.add_argument_group("mixed load (default mode)")
    mixed.add_argument("--requests", type=int, default=300)
    mixed.add_argument("--concurrency", type=int, default=16)
    mixed.add_argument("--parallel", type=int, default=4)
    mixed.add_argument("--max-tokens", type=int, default=32)
    mixed.add_argument("--chat", action="store_true", help="mix in chat completions (model needs a chat template)")
    mixed.add_argument("--rounds", type=int, default=1)
    scale = ap.add_argument_group("throughput scaling")
    scale.add_argument("--streams", type=parse_streams, help="concurrent streams per point, e.g. 1,2,4,8,16")
    scale.add_argument("--prompt-tokens", type=int, default=32)
    scale.add_argument("--gen-tokens", type=int, default=64)
    scale.add_argument("--rounds-per-stream", type=int, default=2)
    scale.add_argument("--policy-mix", action="store_true",
                       help="rotate policies over the requests and compare each with its run alone")
    scale.add_argument("--plot", metavar="FILE.png", help="aggregate tokens/s and p99 inter-token latency vs N")
    scale.add_argument("--json-out", metavar="FILE", help="all points as one JSON list")
    soak = ap.add_argument_group("soak (bench/server_soak.py)")
    soak.add_argument("--minutes", type=float, help="soak for this long: valid, malformed and dropped requests")
    soak.add_argument("--rss-every", type=float, default=2.0, help="seconds between RSS samples")
    soak.add_argument("--rss-slack", type=float, default=8.0, help="MiB of RSS growth after the warm-up allowed")
    soak.add_argument("--plot-rss", metavar="FILE.png", dest="plot_rss", help="RSS over the soak")
    args = ap.parse_args()
    if args.minutes:
        import server_soak

        return server_soak.soak(args)
    return scaling(args) if args.streams else mixed_load(args)


if __name__ == "__main__":
    sys.exit(main())
