"""The Python package (tokensieve, nanobind) against the CLI it wraps: the same tokens, logits and
reports for the same request; errors as exceptions; the GIL released while the engine runs."""
import json
import math
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import TS_PYTHON_DIR, TS_SHARED_DIR, find_model

if not (TS_PYTHON_DIR / "tokensieve").is_dir():
    pytest.skip(f"{TS_PYTHON_DIR} has no tokensieve package (build with -DTS_PYTHON=ON)", allow_module_level=True)
import tokensieve  # noqa: E402
from tokensieve import policies as P  # noqa: E402

DATA = TS_SHARED_DIR / "data"
PROMPT = "Once upon a time, in a small village by the sea,"


@pytest.fixture(scope="module")
def smol():
    return tokensieve.Model(find_model("SmolLM2-135M-Instruct.Q4_1.gguf"), threads=2)


@pytest.fixture(scope="module")
def stories():
    return tokensieve.Model(TS_SHARED_DIR / "models" / "stories260K.gguf", threads=1)


def cli(ts_bin, *args):
    return subprocess.run([str(ts_bin), *map(str, args)], capture_output=True, text=True, check=True).stdout


@pytest.mark.runtime(6)
@pytest.mark.parametrize("policies", [[], ["kvquant:bits=4,group=32", "pfn:n=4"], ["tokenfilter:ratio=0.3"]])
def test_greedy_generation_equals_the_cli(ts_bin, smol, policies):
    flags = [a for p in policies for a in ("--policy", p)]
    want = cli(ts_bin, "run", "-m", smol.path, "-t", 2, "-p", PROMPT, "-n", 40, "--temp", 0, "--ignore-eos", *flags)
    s = smol.session(policies=policies)
    pieces = list(s.generate(PROMPT, max_tokens=40, temperature=0, ignore_eos=True))
    assert PROMPT + "".join(pieces) + "\n" == want
    assert len(pieces) > 10 and all(pieces)
    ids = list(s.generate_ids(PROMPT, max_tokens=40, temperature=0, ignore_eos=True))
    assert len(ids) == 40 and smol.detokenize(ids) == "".join(pieces)
    assert s.n_past == len(smol.tokenize(PROMPT)) + 39  # the last token is sampled, never fed


@pytest.mark.runtime(2)
def test_sampling_is_seeded_and_stops_at_stop_strings(stories):
    s = stories.session()
    a = s.complete("Once upon a time", max_tokens=48, temperature=0.9, seed=7)
    assert a == s.complete("Once upon a time", max_tokens=48, temperature=0.9, seed=7)
    assert a != s.complete("Once upon a time", max_tokens=48, temperature=0.9, seed=8)
    whole = s.complete("Once upon a time", max_tokens=48, temperature=0)
    stop = whole[10:14]
    cut = s.complete("Once upon a time", max_tokens=48, temperature=0, stop=["\u2603", stop])
    assert cut == whole[:whole.index(stop)]


@pytest.mark.runtime(4)
def test_logits_give_the_cli_perplexity(ts_bin, smol, tmp_path):
    text = (DATA / "wikitext2" / "wiki.test.raw").read_text()[:6000]
    f = tmp_path / "text.txt"
    f.write_text(text)
    ctx = 128
    want = json.loads(cli(ts_bin, "ppl", "-m", smol.path, "-t", 2, "-f", f, "-c", ctx, "--chunks", 4, "--json"))
    assert tokensieve.perplexity(smol, file=str(f), ctx=ctx, chunks=4) == want
    # llama-perplexity's protocol from the logits: windows of ctx, each scored on its second half.
    tokens = smol.tokenize(text, special=False)
    s = smol.session(n_ctx=ctx)
    nll = []
    for c in range(4):
        window = tokens[c * ctx:(c + 1) * ctx]
        logits = s.logits(window).astype(np.float64)
        assert logits.shape == (ctx, smol.n_vocab) and logits.flags["C_CONTIGUOUS"]
        for i in range(ctx // 2, ctx - 1):
            row = logits[i]
            nll.append(np.log(np.exp(row - row.max()).sum()) + row.max() - row[window[i + 1]])
    assert math.exp(np.mean(nll)) == pytest.approx(want["ppl"], rel=1e-9)
    assert want["tokens_scored"] == len(nll)
    # token_logprobs scores the same positions the same way.
    lp, greedy = s.token_logprobs(tokens[:ctx], first_target=ctx // 2 + 1)
    assert -lp == pytest.approx(nll[:ctx // 2 - 1], rel=1e-9) and greedy.dtype == bool


@pytest.mark.runtime(3)
def test_loglikelihood_and_evaluate_equal_eval(ts_bin, stories):
    want = json.loads(cli(ts_bin, "eval", "-m", stories.path, "-t", 1, "--task", "piqa", "--limit", 12, "--json"))
    assert tokensieve.evaluate(stories, "piqa", limit=12) == want
    s = stories.session()
    ll, greedy = s.loglikelihood("The cat sat on the", " mat")
    ids = stories.tokenize("The cat sat on the mat")
    ctx_len = len(stories.tokenize("The cat sat on the"))
    lp, each_greedy = s.token_logprobs(ids, first_target=ctx_len)
    assert ll == pytest.approx(lp.sum(), rel=1e-12) and greedy == bool(each_greedy.all())


@pytest.mark.runtime(2)
def test_decisions_are_arrays_over_positions_and_layers(stories):
    L, H = stories.n_layers, stories.n_heads
    s = stories.session([P.OrthoRank(layers=[1, 2], ratio=0.5)])
    prompt = stories.tokenize("Once upon a time there was a little girl named Lily who loved to play")
    s.logits(prompt)
    d = s.decisions()
    n = len(prompt)
    assert d["flags"].shape == (n, L) and d["flags"].dtype == np.uint8
    assert d["scores"].shape == (n, L) and d["keys_attended"].shape == (n, L, H) and d["evicted"].shape == (n, L)
    assert list(d["tokens"]) == prompt and d["policies"] == ["orthorank:layers=1,2,ratio=0.5"]
    ran_ffn = (d["flags"] & tokensieve.RAN_FFN) != 0
    assert ran_ffn[:, 0].all() and ran_ffn[:, 3:].all()  # only the chosen layers skip
    for layer in (1, 2):  # about half the tokens run the layer; the sink itself is not ranked
        assert 0.4 * n <= ran_ffn[:, layer].sum() <= 0.6 * n
        assert d["scores"][0, layer] == np.inf and np.isfinite(d["scores"][1:, layer]).all()
    assert np.isnan(d["scores"][:, 0]).all()
    assert d["ffn_fraction"] == pytest.approx(ran_ffn.mean())
    q = stories.session([P.Quest(keep=0.5, page=4)])
    q.logits(stories.tokenize("Once upon a time there was a little girl named Lily. " * 4))
    keys = q.decisions()["keys_attended"]
    assert (keys[:, 0] == -1).all() and (keys[-1, 1:] > 0).all()  # layer 0 dense (first_layer=1)
    assert (keys[-1, 1:] < keys.shape[0]).all()


def test_policy_classes_come_from_the_registry():
    names = {e["name"] for e in tokensieve._tokensieve.policy_registry()}
    assert names == set(P.registry) and len(names) >= 16
    k = P.KVQuant(bits=2, group=128, mode="kivi", prefill="quantized")
    assert str(k) == "kvquant:bits=2,group=128,mode=kivi,prefill=quantized"
    assert P.parse(str(k)) == P.KVQuant(bits="2", group="128", mode="kivi", prefill="quantized")
    assert str(P.OrthoRank(layers=[3, 5, 7], ratio=0.25)) == "orthorank:layers=3,5,7,ratio=0.25"
    assert str(P.parse("sleb:layers=3,5,7")) == "sleb:layers=3,5,7"
    import inspect
    sig = inspect.signature(P.TokenButler)
    assert {"keep", "predictor", "shared", "sinks"} <= set(sig.parameters)
    assert "predictor" in P.TokenButler.__doc__ and "CLI: --policy tokenbutler:" in P.TokenButler.__doc__
    with pytest.raises(TypeError, match="unknown option"):
        P.KVQuant(bitz=4)


def test_errors_raise_with_the_engine_message(stories, tmp_path):
    with pytest.raises(tokensieve.Error, match="no such file|cannot open"):
        tokensieve.Model(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    with pytest.raises(tokensieve.Error):
        tokensieve.Model(bad)
    with pytest.raises(tokensieve.Error, match="bits must be 8, 4 or 2"):
        stories.session([P.KVQuant(bits=3)])
    with pytest.raises(tokensieve.Error, match="unknown policy 'nosuch'"):
        stories.session(["nosuch:keep=0.5"])
    with pytest.raises(TypeError):
        stories.session([42])
    s = stories.session(n_ctx=64)
    with pytest.raises(tokensieve.Error, match="not in"):
        s.logits([10 ** 6])
    with pytest.raises(tokensieve.Error, match="does not fit"):
        list(s.generate_ids(list(range(3, 100)), max_tokens=4))
    with pytest.raises(tokensieve.Error, match="unknown task"):
        tokensieve.evaluate(stories, "nosuch")
    with pytest.raises(tokensieve.Error, match="one of text, file or dataset"):
        tokensieve.perplexity(stories)
    with pytest.raises(ValueError):
        s.generate("x", max_tokens=-1)
    with pytest.raises(tokensieve.Error, match="threads"):
        tokensieve.Model(stories.path, threads=100000)
    with pytest.raises(tokensieve.Error, match="above the limit"):
        stories.session(n_ctx=10 ** 9)
    with pytest.raises(TypeError):  # a negative size
        stories.session(n_ctx=-1)
    # max_tokens 0 still runs the prompt, as `run -n 0` does; an empty stop string stops nothing.
    assert list(s.generate_ids("Once upon a time", max_tokens=0)) == [] and s.n_past == len(
        stories.tokenize("Once upon a time"))
    assert s.complete("Once upon a time", max_tokens=8, temperature=0, stop="") == s.complete(
        "Once upon a time", max_tokens=8, temperature=0)
    # A generation superseded by a later call on its session stops with an error, not garbage.
    g = s.generate_ids("Once upon a time", max_tokens=8, temperature=0)
    next(g)
    s.logits([1, 2, 3])
    with pytest.raises(tokensieve.Error, match="superseded"):
        next(g)


@pytest.mark.runtime(6)
def test_the_gil_is_released_while_the_engine_runs(smol):
    s = smol.session(n_ctx=2048)
    tokens = smol.tokenize((DATA / "wikitext2" / "wiki.test.raw").read_text()[:20000])[:1500]
    done = threading.Event()
    count = 0

    def spin():
        nonlocal count
        while not done.is_set():
            count += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    t0 = time.perf_counter()
    s.logits(tokens)  # seconds of engine work
    busy = time.perf_counter() - t0
    done.set()
    spinner.join()
    assert busy > 0.2 and count > 10000 * busy  # Python ran while the engine did

    # Two sessions on two threads generate at once, each what it generates alone.
    alone = [smol.session().complete(p, max_tokens=24, temperature=0) for p in (PROMPT, "The history of Rome")]
    got = [None, None]

    def run(i, prompt):
        got[i] = smol.session().complete(prompt, max_tokens=24, temperature=0)

    threads = [threading.Thread(target=run, args=(i, p)) for i, p in enumerate((PROMPT, "The history of Rome"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == alone


def test_model_info_and_tokenizer_equal_the_cli(ts_bin, stories):
    assert stories.info() == json.loads(cli(ts_bin, "info", "-m", stories.path, "--json"))
    assert stories.info(["kvquant:bits=4"])["kv_bytes_per_token"] < stories.info()["kv_bytes_per_token"]
    ids = stories.tokenize("Hello world")
    assert stories.detokenize(ids) == "Hello world"
