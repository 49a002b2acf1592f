"""tools/crosscheck.py: the engine's Token Filtering and ZipVL selections equal an independent float64
NumPy recomputation from the GGUF weights, layer by layer, on a WikiText-2 prompt (issue 17, item 4:
a result that does not reproduce must be the method's, not a bug). Near-ties (a decision within the
tolerance of flipping, float32 against float64) are allowed and counted; anything else fails. The
last test shows the cross-check does fail when the rule it recomputes is not the engine's."""
import sys

import numpy as np
import pytest

from conftest import ROOT, TS_SHARED_DIR, find_model

sys.path.insert(0, str(ROOT / "tools"))
import crosscheck  # noqa: E402

WIKITEXT = TS_SHARED_DIR / "data" / "wikitext2" / "wiki.test.raw"


@pytest.fixture(scope="module")
def prompt() -> str:
    if not WIKITEXT.is_file():
        pytest.skip(f"{WIKITEXT} not found")
    return crosscheck.wikitext_prompt(WIKITEXT, 600)


def assert_agree(results: list[crosscheck.PolicyCheck], min_tokens: int) -> None:
    for r in results:
        assert r.n_tokens >= min_tokens
        assert r.ok(crosscheck.DEFAULT_TIE_TOL), r.verdict(crosscheck.DEFAULT_TIE_TOL)
        assert r.n_diff() <= 2, r.verdict(crosscheck.DEFAULT_TIE_TOL)  # near-ties are rare, not routine
        # The policy acted: some token skipped attention in some layer.
        assert any(not c.engine_kept.all() for c in r.layers), r.spec


@pytest.mark.runtime(2)
def test_stories260k_selections_match_the_reference(ts_bin, prompt):
    model = str(find_model("stories260K.gguf"))
    specs = crosscheck.DEFAULT_POLICIES + ["tokenfilter:ratio=0.2,fusion=intent,kv=cache",
                                           "tokenfilter:ratio=0.3,select=k,tail=1",
                                           "zipvl:tau=0.9,probes=all,score=sum"]
    assert_agree(crosscheck.crosscheck(ts_bin, model, prompt, specs), 300)


@pytest.mark.runtime(1)
def test_qwen2_layout_selections_match_the_reference(ts_bin):
    """qwen2: Q/K/V biases and NeoX RoPE pairs, on the committed tiny quantized model (byte vocabulary,
    512-token context: a 300-character prompt)."""
    model = ROOT / "tests" / "fixtures" / "models" / "tiny-qwen2-quant.gguf"
    if not model.is_file():
        pytest.skip(f"{model} not found")
    if not WIKITEXT.is_file():
        pytest.skip(f"{WIKITEXT} not found")
    specs = ["tokenfilter:ratio=0.3,tail=1", "zipvl:tau=0.9"]
    prompt = crosscheck.wikitext_prompt(WIKITEXT, 300)
    assert_agree(crosscheck.crosscheck(ts_bin, str(model), prompt, specs), 200)


@pytest.mark.runtime(20)
def test_smollm2_selections_match_the_reference(ts_bin, prompt):
    model = str(find_model("SmolLM2-135M-Instruct.Q4_1.gguf"))
    assert_agree(crosscheck.crosscheck(ts_bin, model, prompt, crosscheck.DEFAULT_POLICIES), 128)


@pytest.mark.runtime(2)
def test_a_different_rule_is_caught(ts_bin, prompt):
    path = str(find_model("stories260K.gguf"))
    ids = crosscheck.tokenize(ts_bin, path, prompt)
    model = crosscheck.NumpyLlama(crosscheck.load_raw_tensors(path), crosscheck.read_metadata(path), np.float64)
    for engine_spec, reference_spec in [("tokenfilter:ratio=0.3,fusion=intent", "tokenfilter:ratio=0.3"),
                                        ("zipvl:tau=0.975,seed=1", "zipvl:tau=0.975")]:
        run = crosscheck.run_engine(ts_bin, path, prompt, engine_spec)
        r = crosscheck.check_policy(model, path, ids, run, reference_spec)
        assert not r.ok(crosscheck.DEFAULT_TIE_TOL) and r.n_diff() > 10, r.verdict(crosscheck.DEFAULT_TIE_TOL)
