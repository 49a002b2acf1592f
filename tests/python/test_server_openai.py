"""`tokensieve serve` through the `openai` Python client: completions, streaming and chat give the
text the CLI's `run` gives for the same prompt (greedy), and the other routes answer as documented."""
import subprocess

import pytest

from conftest import find_model
from server_process import Server

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def stories(ts_bin):
    with Server(ts_bin, find_model("stories260K.gguf"), "--parallel", "2") as s:
        yield s
        assert s.stop() == 0


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def cli_greedy(ts_bin, model, prompt, n, chat=False):
    args = [str(ts_bin), "run", "-m", str(model), "-p", prompt, "-n", str(n), "--temp", "0", "-t", "1"]
    res = subprocess.run(args + (["--chat"] if chat else []), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout[:-1]  # run ends with a newline


@pytest.mark.runtime(1)
def test_completion_matches_cli(stories, ts_bin):
    out = client(stories).completions.create(model="stories260K", prompt="Once upon a time", max_tokens=40,
                                             temperature=0)
    assert out.choices[0].finish_reason == "length"
    assert out.usage.completion_tokens == 40
    assert "Once upon a time" + out.choices[0].text == cli_greedy(ts_bin, find_model("stories260K.gguf"),
                                                                  "Once upon a time", 40)


@pytest.mark.runtime(1)
def test_streaming_equals_whole(stories):
    c = client(stories)
    whole = c.completions.create(model="m", prompt="The cat", max_tokens=30, temperature=0).choices[0].text
    chunks = list(c.completions.create(model="m", prompt="The cat", max_tokens=30, temperature=0, stream=True))
    assert len(chunks) > 5  # token by token, not one block
    assert "".join(ch.choices[0].text for ch in chunks) == whole
    assert chunks[-1].choices[0].finish_reason == "length"


@pytest.mark.runtime(1)
def test_sampling_is_seeded(stories):
    c = client(stories)
    draw = lambda seed: c.completions.create(model="m", prompt="Lily", max_tokens=20, temperature=1.0, top_p=0.9,
                                             seed=seed).choices[0].text
    assert draw(7) == draw(7)
    assert len({draw(s) for s in range(1, 5)}) > 1


@pytest.mark.runtime(1)
def test_stop_sequence(stories):
    c = client(stories)
    full = c.completions.create(model="m", prompt="Once upon a time", max_tokens=40, temperature=0).choices[0].text
    cut = c.completions.create(model="m", prompt="Once upon a time", max_tokens=40, temperature=0, stop=["Lily"])
    assert "Lily" in full
    assert cut.choices[0].text == full[:full.index("Lily")]
    assert cut.choices[0].finish_reason == "stop"
    streamed = c.completions.create(model="m", prompt="Once upon a time", max_tokens=40, temperature=0,
                                    stop=["Lily"], stream=True)
    assert "".join(ch.choices[0].text for ch in streamed) == cut.choices[0].text


@pytest.mark.runtime(1)
def test_prompt_list_and_token_prompts(stories):
    c = client(stories)
    single = [c.completions.create(model="m", prompt=p, max_tokens=8, temperature=0).choices[0].text
              for p in ("One day", "Tom")]
    both = c.completions.create(model="m", prompt=["One day", "Tom"], max_tokens=8, temperature=0)
    assert [ch.text for ch in sorted(both.choices, key=lambda ch: ch.index)] == single
    _, tokens = stories.request("POST", "/tokenize", {"prompt": "One day"})
    by_ids = c.completions.create(model="m", prompt=tokens["tokens"], max_tokens=8, temperature=0)
    assert by_ids.choices[0].text == single[0]


@pytest.mark.runtime(1)
def test_echo_logprobs(stories):
    out = client(stories).completions.create(model="m", prompt="Once upon a time", max_tokens=1, temperature=0,
                                             echo=True, logprobs=3)
    lp = out.choices[0].logprobs
    assert out.choices[0].text.startswith("Once upon a time")
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None  # the first token has no context
    assert len(lp.tokens) == out.usage.prompt_tokens + 1
    for token, logprob, top in zip(lp.tokens[1:], lp.token_logprobs[1:], lp.top_logprobs[1:]):
        assert logprob <= 0 and len(top) <= 3
        assert max(top.values()) >= logprob
        if token in top:
            assert top[token] == pytest.approx(logprob)
    # Greedy: the generated token is the likeliest.
    assert lp.token_logprobs[-1] == pytest.approx(max(lp.top_logprobs[-1].values()))


@pytest.mark.runtime(1)
def test_policy_field_and_decisions(stories):
    c = client(stories)
    dense = c.completions.create(model="m", prompt="Once upon a time", max_tokens=20, temperature=0)
    _, d = stories.request("GET", "/v1/decisions/last")
    assert d["request_id"] == dense.id and d["policies"] == [] and d["ffn_fraction"] == 1.0
    assert {f for row in d["flags"] for f in row} == {7}  # every token ran every layer and cached its K/V
    sparse = c.completions.create(model="m", prompt="Once upon a time", max_tokens=20, temperature=0,
                                  extra_body={"policy": ["orthorank:layers=1-3,ratio=0.5"]})
    _, d = stories.request("GET", "/v1/decisions/last")
    assert d["request_id"] == sparse.id
    assert d["policies"] == ["orthorank:layers=1-3,ratio=0.5"]
    assert len(d["flags"]) == 5 and len(d["tokens"]) == sparse.usage.prompt_tokens + 20 - 1
    assert d["ffn_fraction"] < 1.0
    skipped = [layer for layer, row in enumerate(d["flags"]) if any((f & 3) == 0 for f in row)]
    assert skipped == [1, 2, 3]  # only the layers the policy acts on


@pytest.mark.runtime(1)
def test_models_policies_health_metrics(stories):
    models = client(stories).models.list()
    assert [m.id for m in models.data] == ["stories260K"]
    _, policies = stories.request("GET", "/v1/policies")
    assert {"orthorank", "sleb"} <= {p["name"] for p in policies["data"]}
    assert all(p["options"] and p["description"] for p in policies["data"])
    status, health = stories.request("GET", "/health")
    assert status == 200 and health["status"] == "ok" and health["slots"] == 2
    _, text = stories.request("GET", "/metrics")
    for name in ("tokensieve_requests_total", "tokensieve_generated_tokens_total", "tokensieve_queue_depth",
                 "tokensieve_kv_cache_bytes", "tokensieve_generation_tokens_per_second"):
        assert f"# TYPE {name} " in text
    assert stories.metric("tokensieve_generated_tokens_total") > 0


@pytest.mark.runtime(3)
def test_chat_matches_cli(ts_bin):
    model = find_model("SmolLM2-135M-Instruct.Q4_1.gguf")
    with Server(ts_bin, model) as s:
        c = client(s)
        msg = [{"role": "user", "content": "What is the capital of France?"}]
        out = c.chat.completions.create(model="m", messages=msg, max_tokens=12, temperature=0)
        chunks = list(c.chat.completions.create(model="m", messages=msg, max_tokens=12, temperature=0, stream=True))
        assert s.stop() == 0
    assert out.choices[0].message.role == "assistant"
    assert out.choices[0].message.content == cli_greedy(ts_bin, model, msg[0]["content"], 12, chat=True)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == out.choices[0].message.content
