"""`tokensieve serve` replicated with Ray Serve: N engines behind one OpenAI-compatible route.

    python -m tokensieve.serve_ray -m MODEL [--ray local|ADDRESS] [--replicas N | --min-replicas A
        --max-replicas B --target-ongoing-requests R] [--host H --port P] [-- SERVE-ARGS...]

Each replica runs one `tokensieve serve` engine (the C++ server: continuous batching, per-request `policy`,
streaming, its 4xx errors) on a loopback port of its node, and forwards the HTTP requests Ray Serve routes to
it, streamed through as they come. So every route answers as `tokensieve serve` answers: /v1/completions,
/v1/chat/completions (stream or not), /v1/models, /v1/policies, /tokenize, /detokenize, /health, /metrics.
/v1/decisions/last and /metrics are per replica: they describe whichever replica Ray Serve routes the
request to, not the deployment. Arguments after `--` go to every replica's `tokensieve serve` (e.g.
`-- --policy kvquant:bits=4 -c 4096 --parallel 4 -t 2`). The engine binary is --bin, else $TS_BIN, else
`tokensieve` on PATH, else build/bin/tokensieve.
"""
import argparse
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Optional

import aiohttp
from fastapi import FastAPI, Request
from ray import serve
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

app = FastAPI()

# Headers of a proxied response that the client connection, not the engine, decides.
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


def _die_with_parent() -> None:
    """In the engine's child process: SIGTERM when the thread that started it ends (the replica died)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def find_binary(given: Optional[str] = None) -> str:
    for candidate in (given, os.environ.get("TS_BIN"), shutil.which("tokensieve"), "build/bin/tokensieve"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    raise FileNotFoundError("no tokensieve binary: give --bin, set TS_BIN or put tokensieve on PATH")


class EngineProcess:
    """A `tokensieve serve` child on a free loopback port."""

    def __init__(self, binary: str, model: str, serve_args: list[str], cwd: str, timeout: float = 120):
        cmd = [binary, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0", *serve_args]
        started = threading.Event()

        failed: list = []

        def keep():  # this thread outlives nothing but the process: the engine dies with the replica
            try:
                self.proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
            except OSError as e:
                failed.append(e)
                return
            finally:
                started.set()
            self.proc.wait()

        threading.Thread(target=keep, daemon=True).start()
        started.wait()
        if failed:
            raise failed[0]
        deadline, lines = time.monotonic() + timeout, []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:  # the engine exited before listening: its one-line error is the reason
                raise RuntimeError(f"tokensieve serve exited: {''.join(lines[-3:]).strip() or 'no message'}")
            lines.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.url = f"http://127.0.0.1:{m.group(1)}"
                # Keep reading its log, so a full pipe never blocks the engine.
                threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
                return
        self.stop()
        raise TimeoutError(f"tokensieve serve did not listen within {timeout} s")

    def stop(self, grace: float = 30) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # finishes running requests, then exits
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@serve.deployment
@serve.ingress(app)
class TokensieveReplica:
    def __init__(self, binary: str, model: str, serve_args: list[str], cwd: str):
        self.engine = EngineProcess(binary, model, serve_args, cwd)
        self.session: Optional[aiohttp.ClientSession] = None

    def check_health(self) -> None:  # Ray Serve restarts a replica whose engine died
        if self.engine.proc.poll() is not None:
            raise RuntimeError(f"the replica's engine exited ({self.engine.proc.returncode})")

    @app.api_route("/{path:path}", methods=["GET", "POST"])
    async def forward(self, path: str, request: Request):
        if self.session is None:  # created on the replica's event loop
            self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "accept", "authorization")}
        upstream = await self.session.request(request.method, f"{self.engine.url}/{path}", params=request.query_params,
                                              data=await request.body(), headers=headers)
        response_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_HEADERS}
        # Streamed chunk by chunk: server-sent events reach the client as the engine writes them.
        return StreamingResponse(upstream.content.iter_any(), status_code=upstream.status, headers=response_headers,
                                 background=BackgroundTask(upstream.release))

    def __del__(self):
        self.engine.stop()


def deployment(model: str, serve_args: Optional[list] = None, binary: Optional[str] = None, replicas: int = 1,
               autoscaling: Optional[dict] = None, cwd: Optional[str] = None):
    # (No postponed annotations in this module: FastAPI reads the route's parameter types at run time.)
    """The bound application: `replicas` engines, or Ray Serve's autoscaling_config when given."""
    options = {"autoscaling_config": autoscaling} if autoscaling else {"num_replicas": replicas}
    model_path = os.path.abspath(model)
    if not os.path.isfile(model_path):
        raise FileNotFoundError(f"{model}: no such model file")
    return TokensieveReplica.options(**options).bind(find_binary(binary), model_path, list(serve_args or []),
                                                     cwd or os.getcwd())


def main(argv: Optional[list] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    serve_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="python -m tokensieve.serve_ray", description=__doc__.split("\n\n")[0])
    p.add_argument("-m", "--model", required=True, help="GGUF model file (the same path on every node)")
    p.add_argument("--ray", default="local", metavar="local|ADDRESS", help="'local' (default) or a cluster's address")
    p.add_argument("--host", default="127.0.0.1", help="address of Ray Serve's HTTP proxy")
    p.add_argument("--port", type=int, default=8000, help="port of Ray Serve's HTTP proxy")
    p.add_argument("--replicas", type=int, default=1, help="replicas (without autoscaling)")
    p.add_argument("--min-replicas", type=int, help="autoscaling: fewest replicas")
    p.add_argument("--max-replicas", type=int, help="autoscaling: most replicas")
    p.add_argument("--target-ongoing-requests", type=float, default=2.0,
                   help="autoscaling: requests per replica Ray Serve aims for (default 2)")
    p.add_argument("--bin", help="the tokensieve binary (default: $TS_BIN, PATH, build/bin/tokensieve)")
    a = p.parse_args(argv)
    if a.replicas < 1:
        p.error("--replicas must be at least 1")
    autoscaling = None
    if a.min_replicas is not None or a.max_replicas is not None:
        lo, hi = a.min_replicas or 1, a.max_replicas or max(1, a.min_replicas or 1)
        if not 0 <= lo <= hi or hi < 1:
            p.error("need 0 <= --min-replicas <= --max-replicas, --max-replicas >= 1")
        autoscaling = {"min_replicas": lo, "max_replicas": hi, "target_ongoing_requests": a.target_ongoing_requests}
    try:
        application = deployment(a.model, serve_args, a.bin, a.replicas, autoscaling)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    import ray

    ray.init(address=None if a.ray == "local" else a.ray, include_dashboard=False)
    serve.start(http_options={"host": a.host, "port": a.port})
    serve.run(application, name="tokensieve", route_prefix="/")
    print(f"serving on http://{a.host}:{a.port} (Ctrl-C stops)", file=sys.stderr, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    serve.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
