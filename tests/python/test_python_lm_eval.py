"""tokensieve.lm_eval: lm-evaluation-harness's own task pipeline on the engine in-process scores PIQA
document by document as `tokensieve eval` does (dense and under a policy), and its rolling and
generation requests follow lm-eval's protocols. CI runs the first TS_LM_EVAL_LIMIT (default 20)
documents; the 500-document figure is in docs/results/eval_parity.md."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TS_PYTHON_DIR, TS_SHARED_DIR, find_model

if not (TS_PYTHON_DIR / "tokensieve").is_dir():
    pytest.skip(f"{TS_PYTHON_DIR} has no tokensieve package (build with -DTS_PYTHON=ON)", allow_module_level=True)
lm_eval = pytest.importorskip("lm_eval")
pytest.importorskip("datasets")
import tokensieve  # noqa: E402
import tokensieve.lm_eval as ts_lm_eval  # noqa: E402

LIMIT = int(os.environ.get("TS_LM_EVAL_LIMIT", "20"))
DATA = TS_SHARED_DIR / "data"


@pytest.fixture(scope="module")
def local_datasets():
    sys.path.insert(0, str(ROOT / "tools"))
    import lm_eval_parity

    if not (DATA / "piqa").is_dir():
        pytest.skip("PIQA data not found")
    lm_eval_parity.datasets.load_dataset = lambda path, name=None, **_: lm_eval_parity.local_dataset(
        str(DATA), path, name)


@pytest.mark.runtime(20)
@pytest.mark.parametrize("policy", ["", "kvquant:bits=4;group=32+pfn:n=4"])
def test_piqa_matches_eval_document_by_document(ts_bin, local_datasets, tmp_path, policy):
    model = find_model("SmolLM2-135M-Instruct.Q4_1.gguf")
    specs = ts_lm_eval.policy_specs(policy)
    samples = tmp_path / "samples.jsonl"
    res = subprocess.run([str(ts_bin), "eval", "-m", str(model), "--task", "piqa", "--limit", str(LIMIT), "-t", "2",
                          "--data-dir", str(DATA), "--samples", str(samples), "--json",
                          *[a for s in specs for a in ("--policy", s)]],
                         capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr
    ours = json.loads(res.stdout)["piqa"]
    our_lls = {s["doc_id"]: s["lls"] for s in map(json.loads, samples.read_text().splitlines())}

    out = lm_eval.simple_evaluate(model="tokensieve", model_args=f"pretrained={model},threads=2,policy={policy}",
                                  tasks=["piqa"], num_fewshot=0, limit=LIMIT, log_samples=True)
    theirs = out["results"]["piqa"]
    assert out["n-samples"]["piqa"]["effective"] == ours["n"] == LIMIT
    for s in out["samples"]["piqa"]:
        for a, b in zip(our_lls[s["doc_id"]], s["filtered_resps"], strict=True):
            assert float(b[0]) == pytest.approx(a, abs=1e-6)
    assert theirs["acc,none"] == ours["acc"] and theirs["acc_norm,none"] == ours["acc_norm"]


class Request:
    def __init__(self, *args):
        self.args = args


def test_rolling_and_generation_requests_follow_lm_eval(local_datasets):
    stories = str(TS_SHARED_DIR / "models" / "stories260K.gguf")
    lm = ts_lm_eval.TokensieveLM(pretrained=stories, threads=1, n_ctx=32)
    model, session = lm.model, lm.session
    text = "Once upon a time there was a little girl named Lily. She loved to play outside in the park." * 2
    ids = model.tokenize(text)  # as the model tokenizes (stories260K adds BOS)
    assert len(ids) > 32  # several disjoint windows
    want = 0.0
    for start in range(0, len(ids), 32):  # window i predicts ids[start:start+32] from what precedes it
        context = [lm.prefix_token] if start == 0 else ids[start - 1:start]
        chunk = ids[start:start + 32]
        full = (ids[max(0, start + len(chunk) - 33):start] if start else context) + chunk
        lp, _ = session.token_logprobs(full, first_target=len(full) - len(chunk))
        want += float(lp.sum())
    assert lm.loglikelihood_rolling([Request(text)]) == [pytest.approx(want, rel=1e-12)]

    whole = session.complete("Once upon a time", max_tokens=20, temperature=0)
    stop = whole.strip().split()[3]
    got = lm.generate_until([Request("Once upon a time", {"until": [stop], "max_gen_toks": 20})])
    assert got == [whole[:whole.index(stop)]]
    ll, greedy = lm.loglikelihood([Request("", " Lily")])[0]
    lp, g = session.token_logprobs([lm.prefix_token] + model.tokenize(" Lily", add_bos=False))
    assert ll == pytest.approx(float(lp.sum())) and greedy == bool(g.all())
    assert ts_lm_eval.policy_specs("kvquant:bits=2;group=128+pfn:n=4") == ["kvquant:bits=2,group=128", "pfn:n=4"]
    with pytest.raises(TypeError):  # a model_args typo is an error, never a silent dense run
        ts_lm_eval.TokensieveLM.create_from_arg_string(f"pretrained={stories},policies=kvquant:bits=4")
    # Registering ours leaves lm-eval's own models reachable in the same process.
    assert lm_eval.api.registry.get_model("local-completions").__name__ != "TokensieveLM"


@pytest.mark.runtime(15)
def test_module_runs_lm_evals_command_line(local_datasets, tmp_path):
    # lm-eval's CLI in a fresh process: the local data loader has to be patched there too.
    runner = tmp_path / "run.py"
    runner.write_text(
        "import sys, runpy\n"
        f"sys.path.insert(0, {str(ROOT / 'tools')!r})\n"
        "import lm_eval_parity\n"
        "lm_eval_parity.datasets.load_dataset = lambda path, name=None, **_: "
        f"lm_eval_parity.local_dataset({str(DATA)!r}, path, name)\n"
        "runpy.run_module('tokensieve.lm_eval', run_name='__main__')\n")
    model = TS_SHARED_DIR / "models" / "stories260K.gguf"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TS_PYTHON_DIR), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, str(runner), "--model_args", f"pretrained={model},threads=1",
                          "--tasks", "piqa", "--limit", "5", "--output_path", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "piqa" in res.stdout and "acc" in res.stdout
