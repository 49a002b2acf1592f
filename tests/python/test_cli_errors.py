"""Bad input gives one clear error line and a non-zero exit, never a crash or a hang."""
import subprocess

import pytest

from conftest import TS_BIN, TS_SHARED_DIR

BIN = str(TS_BIN)
STORIES = str(TS_SHARED_DIR / "models" / "stories260K.gguf")


def run(*args, timeout=60):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


def assert_clean_error(res, *needles):
    assert res.returncode not in (0, -6, -11), res  # not success, not abort/segfault
    assert res.returncode > 0
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error:"), lines[0]
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture(scope="module")
def stories_bytes():
    with open(STORIES, "rb") as f:
        return f.read()


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def test_missing_model_file():
    assert_clean_error(run("info", "-m", "/nonexistent/model.gguf"), "cannot open")


def test_wrong_magic(tmp_path, stories_bytes):
    assert_clean_error(run("info", "-m", write(tmp_path, "bad.gguf", b"GGML" + stories_bytes[4:])), "magic")


@pytest.mark.parametrize("cut", [0, 3, 10, 24, 100, 5000, 600000])
def test_truncated_file(tmp_path, stories_bytes, cut):
    assert_clean_error(run("info", "-m", write(tmp_path, f"cut{cut}.gguf", stories_bytes[:cut])))


def test_truncated_tensor_data(tmp_path, stories_bytes):
    path = write(tmp_path, "short.gguf", stories_bytes[:-100])
    assert_clean_error(run("run", "-m", path, "-p", "hi", "-n", "1"))


def test_directory_as_model(tmp_path):
    assert_clean_error(run("info", "-m", str(tmp_path)))


def test_unknown_architecture(tmp_path, stories_bytes):
    # Same length, so every offset stays valid: only the architecture string changes.
    data = stories_bytes.replace(b"\x05\x00\x00\x00\x00\x00\x00\x00llama", b"\x05\x00\x00\x00\x00\x00\x00\x00llamb", 1)
    assert data != stories_bytes
    assert_clean_error(run("info", "-m", write(tmp_path, "arch.gguf", data)), "architecture")


def test_bad_flags():
    res = run("run", "-m", STORIES, "-p", "x", "-n", "notanumber")
    assert res.returncode == 2 and res.stderr.startswith("error:")
    res = run("nosuchcommand")
    assert res.returncode == 2 and res.stderr.startswith("error:")
    res = run("run", "-p", "x")  # -m missing
    assert res.returncode == 2 and "model" in res.stderr


def test_prompt_longer_than_context():
    assert_clean_error(run("run", "-m", STORIES, "-c", "8", "-p", "Once upon a time there was a big dog"), "context")


def test_missing_text_file():
    assert_clean_error(run("ppl", "-m", STORIES, "-f", "/nonexistent.txt"), "cannot open")


def test_ppl_text_shorter_than_window(tmp_path):
    assert_clean_error(run("ppl", "-m", STORIES, "-f", write(tmp_path, "t.txt", b"tiny"), "-c", "128"), "window")


def test_chat_without_template():
    assert_clean_error(run("run", "-m", STORIES, "--chat", "-p", "hi"), "chat_template")


def test_tokenize_json_array():
    res = run("tokenize", "-m", STORIES, "-p", "Once upon a time")
    assert res.returncode == 0
    ids = [int(x) for x in res.stdout.strip()[1:-1].split(",")]
    assert ids[0] == 1 and len(ids) > 2
