"""stories260K's greedy output from BOS + "Once upon a time" is the text llama2.c publishes
(quoted in ../shared/models/README.md), through the CLI as a user runs it."""
import re
import subprocess

from conftest import TS_SHARED_DIR, find_model


def test_stories260k_greedy_story(ts_bin):
    readme = (TS_SHARED_DIR / "models" / "README.md").read_text()
    m = re.search(r'continues\s+"(Once upon a time.*?)"\s*\n\s*\(llama2', readme, re.S)
    assert m, "known answer not found in the shared README"
    expected = " ".join(m.group(1).split())
    model = find_model("stories260K.gguf")
    res = subprocess.run([str(ts_bin), "run", "-m", str(model), "-p", "Once upon a time", "-n", "57", "--temp", "0"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert " ".join(res.stdout.split()).startswith(expected), res.stdout
    assert "tok/s" in res.stderr.strip().splitlines()[-1]  # the last stderr line reports speeds
