"""lm-evaluation-harness's `local-completions` model against `tokensieve serve` scores PIQA as
`tokensieve eval` does: the same accuracy and, document by document, the same log-likelihoods.

lm-eval tokenizes through the server's vLLM-style /tokenize route (its remote tokenizer, which adds
no BOS; SmolLM2 adds none either, so both sides see identical tokens) and scores each request with
echo + logprobs. Documents come from the shared data files through tools/lm_eval_parity.py's
dataset loader, as for the engine's own parity runs. CI runs the first TS_LM_EVAL_LIMIT (default 20)
documents; the 200-document figure is in docs/server.md."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TS_SHARED_DIR, find_model
from server_process import Server

LIMIT = int(os.environ.get("TS_LM_EVAL_LIMIT", "20"))


@pytest.mark.runtime(30)
def test_local_completions_piqa_matches_eval(ts_bin, tmp_path):
    lm_eval = pytest.importorskip("lm_eval")
    pytest.importorskip("datasets")
    sys.path.insert(0, str(ROOT / "tools"))
    import lm_eval_parity

    data_dir = TS_SHARED_DIR / "data"
    if not (data_dir / "piqa").is_dir():
        pytest.skip("PIQA data not found")
    model = find_model("SmolLM2-135M-Instruct.Q4_1.gguf")

    samples = tmp_path / "samples.jsonl"
    res = subprocess.run([str(ts_bin), "eval", "-m", str(model), "--task", "piqa", "--limit", str(LIMIT), "-t", "1",
                          "--data-dir", str(data_dir), "--samples", str(samples), "--json"],
                         capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr
    ours = json.loads(res.stdout)["piqa"]
    our_lls = {s["doc_id"]: s["lls"] for s in map(json.loads, samples.read_text().splitlines())}

    lm_eval_parity.datasets.load_dataset = lambda path, name=None, **_: lm_eval_parity.local_dataset(
        str(data_dir), path, name)
    with Server(ts_bin, model) as server:
        out = lm_eval.simple_evaluate(
            model="local-completions",
            model_args={"base_url": server.url + "/v1/completions", "model": "SmolLM2", "tokenizer_backend": "remote",
                        "tokenized_requests": True, "num_concurrent": 1, "max_retries": 1},
            tasks=["piqa"], num_fewshot=0, limit=LIMIT, log_samples=True)
        assert server.stop() == 0
    theirs = out["results"]["piqa"]
    assert out["n-samples"]["piqa"]["effective"] == ours["n"] == LIMIT
    worst = max(abs(a - float(b[0]))
                for s in out["samples"]["piqa"]
                for a, b in zip(our_lls[s["doc_id"]], s["filtered_resps"], strict=True))
    print(f"\nPIQA limit {LIMIT}: tokensieve eval acc {ours['acc']} acc_norm {ours['acc_norm']}; lm-eval "
          f"local-completions acc {theirs['acc,none']} acc_norm {theirs['acc_norm,none']}; max |dll| {worst:.3g}")
    assert worst < 1e-3, worst
    assert theirs["acc,none"] == ours["acc"]
    assert theirs["acc_norm,none"] == ours["acc_norm"]
