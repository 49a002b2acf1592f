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
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from typing import Optional

try:
    import aiohttp
    from fastapi import FastAPI, Request
    from ray import serve
    from starlette.background import BackgroundTask
    from starlette.responses import StreamingResponse
except ImportError as e:
    if __name__ == "__main__":
        sys.exit(f"error: python -m tokensieve.serve_ray needs Ray Serve: pip install 'ray[serve]' ({e})")
    raise

app = FastAPI()

# Headers of a proxied response that the client connection, not the engine, decides.
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


# Started in front of the engine: asks the kernel for SIGTERM when the thread that started it ends (the
# replica died; PR_SET_PDEATHSIG survives exec), then becomes the engine. A separate process, because
# code run between fork and exec (preexec_fn) may deadlock in a process with threads, as a replica is.
_DIE_WITH_PARENT = ("import ctypes, os, signal, sys\n"
                    "ctypes.CDLL(None).prctl(1, signal.SIGTERM)\n"
                    "if os.getppid() != int(sys.argv[1]): sys.exit(1)  # the parent is already gone\n"
                    "os.execv(sys.argv[2], sys.argv[2:])")


def find_binary(given: Optional[str] = None) -> str:
    for candidate in (given, os.environ.get("TS_BIN"), shutil.which("tokensieve"), "build/bin/tokensieve"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    raise FileNotFoundError("no tokensieve binary: give --bin, set TS_BIN or put tokensieve on PATH")


class EngineProcess:
    """A `tokensieve serve` child on a free loopback port."""

    def __init__(self, binary: str, model: str, serve_args: list[str], cwd: str, timeout: float = 120):
        cmd = [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), binary, "serve", "-m", model, "--host",
               "127.0.0.1", "--port", "0", *serve_args]
        started = threading.Event()
        failed: list = []

        def keep():  # this thread outlives nothing but the process: the engine dies with the replica
            try:
                self.proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE, text=True)
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
        lines: queue.Queue = queue.Queue()

        def read_log():  # to the end, so a full pipe never blocks the engine; None: it closed
            for line in self.proc.stderr:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read_log, daemon=True).start()
        seen: list[str] = []
        try:
            while (line := lines.get(timeout=timeout)) is not None:
                seen.append(line)
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m:
                    self.url = f"http://127.0.0.1:{m.group(1)}"
                    return
        except queue.Empty:
            self.stop()
            raise TimeoutError(f"tokensieve serve did not listen within {timeout} s") from None
        # The engine exited before listening: its one-line error is the reason.
        raise RuntimeError(f"tokensieve serve exited: {''.join(seen[-3:]).strip() or 'no message'}")

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


# (No postponed annotations in this module: FastAPI reads the route's parameter types at run time.)
def deployment(model: str, serve_args: Optional[list] = None, binary: Optional[str] = None, replicas: int = 1,
               autoscaling: Optional[dict] = None, cwd: Optional[str] = None):
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
    p.add_argument("--replicas", type=int, help="a fixed number of replicas (default 1)")
    p.add_argument("--min-replicas", type=int, help="autoscaling: fewest replicas (0 allowed)")
    p.add_argument("--max-replicas", type=int, help="autoscaling: most replicas")
    p.add_argument("--target-ongoing-requests", type=float,
                   help="autoscaling: requests per replica Ray Serve aims for (default 2)")
    p.add_argument("--bin", help="the tokensieve binary (default: $TS_BIN, PATH, build/bin/tokensieve)")
    a = p.parse_args(argv)
    if not 1 <= a.port <= 65535:
        p.error("--port must be in [1, 65535]")
    autoscaling = None
    if a.min_replicas is not None or a.max_replicas is not None:
        if a.replicas is not None:
            p.error("--replicas is a fixed count: give it or --min-replicas/--max-replicas, not both")
        lo = 1 if a.min_replicas is None else a.min_replicas
        hi = max(lo, 1) if a.max_replicas is None else a.max_replicas
        if not 0 <= lo <= hi or hi < 1:
            p.error("need 0 <= --min-replicas <= --max-replicas and --max-replicas >= 1")
        target = 2.0 if a.target_ongoing_requests is None else a.target_ongoing_requests
        if not target > 0:
            p.error("--target-ongoing-requests must be above 0")
        autoscaling = {"min_replicas": lo, "max_replicas": hi, "target_ongoing_requests": target}
    elif a.target_ongoing_requests is not None:
        p.error("--target-ongoing-requests needs --min-replicas or --max-replicas (autoscaling)")
    if a.replicas is not None and a.replicas < 1:
        p.error("--replicas must be at least 1")
    try:
        application = deployment(a.model, serve_args, a.bin, a.replicas or 1, autoscaling)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    import ray

    try:
        ray.init(address=None if a.ray == "local" else a.ray, include_dashboard=False)
        serve.start(http_options={"host": a.host, "port": a.port})
        serve.run(application, name="tokensieve", route_prefix="/")
    except Exception as e:  # Ray's own errors (no cluster, port taken, replicas failing) end in one line
        text = str(e).strip().splitlines()
        print(f"error: {text[-1] if text else type(e).__name__}", file=sys.stderr)
        return 1
    print(f"serving on http://{a.host}:{a.port} (Ctrl-C stops)", file=sys.stderr, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    serve.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
