"""A `tokensieve serve` process for tests: started on a free port (--port 0, the address read from
its first stderr line), stopped with SIGTERM, which must end it with exit code 0."""
import json
import re
import signal
import subprocess
import threading
import urllib.error
import urllib.request


class Server:
    def __init__(self, ts_bin, model, *args, threads=1):
        self.proc = subprocess.Popen([str(ts_bin), "serve", "-m", str(model), "--port", "0", "-t", str(threads), *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"listening on (http://\S+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line}{self.proc.stderr.read()}")
        self.url = m.group(1)
        self.stderr_lines = []
        # Keep draining stderr so the server never blocks on a full pipe.
        self._drain = threading.Thread(target=lambda: self.stderr_lines.extend(self.proc.stderr), daemon=True)
        self._drain.start()

    def request(self, method, path, body=None, raw=None, headers=None):
        """(status, parsed JSON or text) of one request; errors are answers too."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        try:
            return status, json.loads(text)
        except json.JSONDecodeError:
            return status, text

    def metric(self, name):
        _, text = self.request("GET", "/metrics")
        m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        return float(m.group(1)) if m else None

    def stop(self, timeout=60):
        """SIGTERM; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        self._drain.join(timeout=5)
        return code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.stop()
