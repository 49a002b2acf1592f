"""tools/crosscheck.py: the engine's Token Filtering, ZipVL, OrthoRank, KVSink and TokenButler selections equal
an independent float64 NumPy recomputation from the GGUF weights, layer by layer, on a WikiText-2 prompt
(issue 17, item 4: a result that does not reproduce must be the method's, not a bug). Near-ties (a
decision within the tolerance of flipping, float32 against float64) are allowed and counted; anything
else fails. The test_a_different_*_rule_is_caught tests show the cross-check does fail when the rule it
recomputes is not the engine's."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, TS_SHARED_DIR, find_model

sys.path.insert(0, str(ROOT / "tools"))
import crosscheck  # noqa: E402
import numpy_butler  # noqa: E402

WIKITEXT = TS_SHARED_DIR / "data" / "wikitext2" / "wiki.test.raw"


@pytest.fixture(scope="module")
def prompt() -> str:
    if not WIKITEXT.is_file():
        pytest.skip(f"{WIKITEXT} not found")
    return crosscheck.wikitext_prompt(WIKITEXT, 600)


@pytest.fixture(scope="module")
def stories(ts_bin, prompt) -> tuple[str, list[int], crosscheck.NumpyLlama]:
    """stories260K's path, the prompt's token ids and its float64 NumPy model, for the tests that run the engine
    with one rule and check it against another."""
    path = str(find_model("stories260K.gguf"))
    ids = crosscheck.tokenize(ts_bin, path, prompt)
    return path, ids, crosscheck.NumpyLlama(crosscheck.load_raw_tensors(path), crosscheck.read_metadata(path),
                                            np.float64)


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


def assert_caught(ts_bin, prompt, stories, pairs):
    """Each engine run under another rule (engine_spec) disagrees with the reference's rule (reference_spec)."""
    path, ids, model = stories
    for engine_spec, reference_spec in pairs:
        run = crosscheck.run_engine(ts_bin, path, prompt, engine_spec)
        r = crosscheck.check_policy(model, path, ids, run, reference_spec)
        assert not r.ok(crosscheck.DEFAULT_TIE_TOL) and r.n_diff() > 10, r.verdict(crosscheck.DEFAULT_TIE_TOL)


@pytest.mark.runtime(2)
def test_a_different_rule_is_caught(ts_bin, prompt, stories):
    assert_caught(ts_bin, prompt, stories, [("tokenfilter:ratio=0.3,fusion=intent", "tokenfilter:ratio=0.3"),
                                            ("zipvl:tau=0.975,seed=1", "zipvl:tau=0.975")])


# OrthoRank (paper 000): in the chosen layers the int(ratio * N) tokens of smallest |h_0 . h_i| (h the layer's
# RMSNorm_attn output, the sink h_0 never chosen) run attention and FFN; the others keep h and write K/V.
@pytest.mark.runtime(3)
def test_stories260k_orthorank_selections_match_the_reference(ts_bin, prompt, tmp_path):
    model = str(find_model("stories260K.gguf"))
    profile = tmp_path / "stories260k-orthorank.json"  # a profile searched on this model (the engine checks)
    subprocess.run([str(ts_bin), "calibrate", "orthorank", "-m", model, "-t", "1", "--method", "shortened",
                    "--sparsity", "0.2", "--ratio", "0.5", "--calib-ctx", "128", "-o", str(profile)],
                   check=True, capture_output=True)
    specs = [f"orthorank:profile={profile}", "orthorank:layers=1-3", "orthorank:layers=0,2-4,ratio=0.5,kv=selected",
             "orthorank:layers=1-4,select=reverse,stage=residual", "orthorank:layers=1-3,select=random,seed=7"]
    results = crosscheck.crosscheck(ts_bin, model, prompt, specs)
    assert_agree(results, 300)
    for r in results:
        assert r.scores and not r.flag_errors, r.verdict(crosscheck.DEFAULT_TIE_TOL)  # the log's scores compared
    assert [c.layer for c in results[0].layers] == json.loads(profile.read_text())["layers"]
    assert [c.layer for c in results[2].layers] == [0, 2, 3, 4]
    # k = int(ratio * N) of the N prompt tokens run each chosen layer: 0.333 by default, the profile's 0.5
    n = results[0].n_tokens
    assert all(int(c.engine_kept.sum()) == int(0.5 * n) for c in results[0].layers)
    assert all(int(c.engine_kept.sum()) == int(0.333 * n) for c in results[1].layers)


@pytest.mark.runtime(2)
def test_a_different_orthorank_rule_is_caught(ts_bin, prompt, stories):
    assert_caught(ts_bin, prompt, stories, [("orthorank:layers=1-3,stage=residual", "orthorank:layers=1-3"),
                                            ("orthorank:layers=1-3,select=reverse", "orthorank:layers=1-3"),
                                            ("orthorank:layers=1-3,ratio=0.4", "orthorank:layers=1-3")])


@pytest.mark.runtime(1)
def test_orthorank_score_drift_is_reported_apart_from_the_flags(ts_bin, prompt, stories):
    """Logged scores beyond --score-tol (as --no-exact's 8-bit activations give, up to ~8% on SmolLM2) are score
    drift, not a log inconsistent with the policy: the flags are still the rule applied to the logged scores."""
    path, ids, model = stories
    spec = "orthorank:layers=1-3"
    run = crosscheck.run_engine(ts_bin, path, prompt, spec)
    r = crosscheck.check_policy(model, path, ids, run, spec, score_tol=0.0)  # any float32 difference is drift
    verdict = r.verdict(crosscheck.DEFAULT_TIE_TOL)
    assert r.score_drift and not r.flag_errors and not r.ok(crosscheck.DEFAULT_TIE_TOL), verdict
    assert verdict.startswith("DISAGREE: identical selections") and "inconsistent" not in verdict, verdict
    # A log whose flags are not the rule applied to its own scores is still inconsistent with the policy.
    run.scores[2] = -run.scores[2]
    r = crosscheck.check_policy(model, path, ids, run, spec)
    assert any("not the rule applied to the logged scores" in e for e in r.flag_errors), r.verdict(1e-4)


# KVSink (paper 002) with an INT2 KIVI cache: the k prompt tokens of largest |h[:, C]| after block L
# keep full-precision K/V in layers L+1..last (the log's kv_full_precision flag), none before.
# Under prefill=quantized the decision reads a forward whose blocks 0..L attend to coded K/V, which the
# reference models (crosscheck.quantized_attention); prefill=full reads half-precision K/V only.
KIVI2 = "kvquant:bits=2,group=128,mode=kivi"


def assert_kvsink_agree(results: list[crosscheck.PolicyCheck], min_tokens: int, exact: bool) -> None:
    """exact: identical pins and next token (a forward float32 noise cannot move); otherwise every
    difference must be one float32-level noise flips in the reference's members."""
    for r in results:
        assert isinstance(r, crosscheck.KvSinkCheck), r.spec
        assert r.n_tokens >= min_tokens
        assert r.ok(crosscheck.DEFAULT_TIE_TOL), r.verdict(crosscheck.DEFAULT_TIE_TOL)
        assert len(r.engine_sinks) == r.k and r.layers and r.layers[0].layer == r.layer + 1, r.verdict(1e-4)
        if exact:
            assert not r.differ() and r.next_token_ok, r.verdict(crosscheck.DEFAULT_TIE_TOL)


@pytest.mark.runtime(4)
def test_stories260k_kvsink_pins_match_the_reference(ts_bin, prompt):
    model = str(find_model("stories260K.gguf"))
    sink = "kvsink:k=5,layer=2,channel=15"
    specs = [f"{KIVI2},prefill=quantized;{sink}", f"{KIVI2},prefill=full;{sink}",
             "kvquant:bits=4,group=32,mode=token,residual=32,prefill=quantized;kvsink:k=8,layer=1,channel=30"]
    results = crosscheck.crosscheck(ts_bin, model, prompt, specs, members=4)
    assert_kvsink_agree(results, 300, exact=True)
    # stories260K's quantized forward is well conditioned: float32-level noise moves no decision
    # (prefill=full reads no codes before the decision, so it runs no noise members).
    assert [r.members for r in results] == [4, 0, 4]
    assert not results[0].unsettled and not results[2].unsettled
    # The quantized blocks 0..2 change which tokens the rule picks: the reference had to model them.
    assert results[0].ref_sinks != results[1].ref_sinks


@pytest.mark.runtime(40)
def test_smollm2_kvsink_pins_match_the_reference(ts_bin, prompt):
    """The results' setting (docs/results/kvsink.md): INT2 KIVI, fake-quant prefill, the committed profile
    (emergence layer 11, channel 507). Its quantized forward amplifies float32 rounding (|h| near the
    cut moves by ~1e-2 under one-ulp noise on Q/K/V), so a difference there passes only as a decision
    that noise flips; prefill=full must agree exactly."""
    model = str(find_model("SmolLM2-135M-Instruct.Q4_1.gguf"))
    profile = ROOT / "profiles" / "smollm2-135m-kvsink.json"
    if not profile.is_file():
        pytest.skip(f"{profile} not found")
    sink = f"kvsink:k=5,profile={profile}"
    quantized, full = crosscheck.crosscheck(ts_bin, model, prompt, [f"{KIVI2},prefill=quantized;{sink}",
                                                                    f"{KIVI2},prefill=full;{sink}"], members=4)
    assert_kvsink_agree([quantized], 128, exact=False)
    assert_kvsink_agree([full], 128, exact=True)
    for r in (quantized, full):
        assert (r.layer, r.channel) == (11, 507) and r.layers[-1].layer == 29
        assert 0 in r.engine_sinks  # the massive activation (|h| ~2e4) sits on position 0


@pytest.mark.runtime(3)
def test_a_different_kvsink_rule_is_caught(ts_bin, prompt, stories):
    path, ids, model = stories
    engine_spec = f"{KIVI2},prefill=quantized;kvsink:k=5,layer=2,channel=15"
    run = crosscheck.run_engine(ts_bin, path, prompt, engine_spec)
    for reference_spec in [f"{KIVI2},prefill=quantized;kvsink:k=5,layer=2,channel=30",
                           f"{KIVI2},prefill=quantized;kvsink:k=5,layer=1,channel=15",
                           # a reference blind to the coded K/V of blocks 0..2 the decision reads
                           f"{KIVI2},prefill=full;kvsink:k=5,layer=2,channel=15"]:
        r = crosscheck.check_policy(model, path, ids, run, reference_spec, members=2)
        assert not r.ok(crosscheck.DEFAULT_TIE_TOL) and len(r.differ()) >= 2, r.verdict(crosscheck.DEFAULT_TIE_TOL)


# TokenButler (paper 001): at layers >= 1 each (position, query head) attends to the ceil(keep * (pos + 1)) keys of
# largest predicted importance q_imp . k_imp (importance keys stored in half precision, or int8 with keys=i8) plus
# positions 0-3; the predictor is recomputed from its file (tools/numpy_butler.py) and the engine's key lists
# (--decision-log-keys) compared list by list.
def stories_butler(directory, seed: int) -> str:
    """A predictor with random weights (the paper's init) shaped for stories260K: E/8 = 8 in 4 heads, d = 8, I = 16.
    (`tokensieve train-butler` cannot make one: its attention has the model's 8 heads, of size 1.)"""
    config = numpy_butler.ButlerConfig(n_embd=64, n_reduced=8, n_heads=4, n_layers=5, first_layer=1, n_query_heads=8,
                                       imp_dim=8, inter=16, rope_base=10000.0)
    path = directory / f"stories260k-butler-{seed}.safetensors"
    numpy_butler.save_butler(str(path), config, numpy_butler.random_butler(config, seed))
    return str(path)


@pytest.fixture(scope="module")
def butler(tmp_path_factory) -> str:
    return stories_butler(tmp_path_factory.mktemp("butler"), 1)


@pytest.mark.runtime(10)
def test_stories260k_tokenbutler_keys_match_the_reference(ts_bin, prompt, butler):
    model = str(find_model("stories260K.gguf"))
    options = [",keep=0.5", ",keep=0.5,shared=1", ",keep=0.4,keys=i8", ",keep=0.3,recent=8,sinks=2,first_layer=2"]
    results = crosscheck.crosscheck(ts_bin, model, prompt, [f"tokenbutler:predictor={butler}{o}" for o in options])
    for r in results:
        assert isinstance(r, crosscheck.TokenButlerCheck) and not r.flag_errors, r.spec
        assert r.n_tokens >= 300 and r.next_token_ok
        assert r.ok(crosscheck.DEFAULT_TIE_TOL), r.verdict(crosscheck.DEFAULT_TIE_TOL)
        lists = sum(c.n_lists for c in r.layers)
        assert sum(c.identical for c in r.layers) >= lists - 3, r.verdict(crosscheck.DEFAULT_TIE_TOL)  # near-ties: rare
    assert [c.layer for c in results[0].layers] == [1, 2, 3, 4]
    assert [c.layer for c in results[3].layers] == [2, 3, 4]
    # The budget: about keep of the (position, candidate) pairs, plus the sinks.
    n = results[0].n_tokens
    pairs = n * (n + 1) / 2 * 8
    assert all(0.5 * pairs < c.n_keys < 0.5 * pairs + 4 * n * 8 for c in results[0].layers)
    # The engine's half-precision importance keys are modelled: unrounded keys would pick other keys somewhere.
    assert sum(c.unrounded for c in results[0].layers) > sum(c.n_lists - c.identical for c in results[0].layers)


@pytest.mark.runtime(8)
def test_a_different_tokenbutler_rule_is_caught(ts_bin, prompt, butler, tmp_path, stories):
    path, ids, model = stories
    reference_spec = f"tokenbutler:keep=0.5,predictor={butler}"
    other = stories_butler(tmp_path, 2)
    for engine_spec in [f"tokenbutler:keep=0.6,predictor={butler}", f"{reference_spec},shared=1",
                        f"tokenbutler:keep=0.5,predictor={other}"]:
        run = crosscheck.run_engine(ts_bin, path, prompt, engine_spec)
        r = crosscheck.check_policy(model, path, ids, run, reference_spec)
        verdict = r.verdict(crosscheck.DEFAULT_TIE_TOL)
        assert not r.ok(crosscheck.DEFAULT_TIE_TOL) and r.n_diff() > 100 and verdict.startswith("DISAGREE"), verdict
    with pytest.raises(crosscheck.CrosscheckError, match="not covered"):
        crosscheck.TokenButlerReference({"keep": "0.5", "predictor": butler, "window": "8"}, model)


# Bad input ends in one line `crosscheck: <reason>` on stderr and a non-zero exit, never a traceback.
@pytest.mark.runtime(1)
def test_bad_predictor_or_profile_files_are_input_errors(stories, butler, tmp_path):
    """The files the engine reads first, read again by the reference: missing, truncated, not the format."""
    _, _, model = stories
    data = open(butler, "rb").read()
    truncated, garbage, profile = tmp_path / "truncated.safetensors", tmp_path / "garbage.json", tmp_path / "p.json"
    truncated.write_bytes(data[:len(data) // 2])
    garbage.write_text("{not json")
    profile.write_text(json.dumps({"policy": "orthorank", "ratio": 0.5}))
    for predictor, reason in [(tmp_path / "missing.safetensors", "No such file"), (truncated, "do not fit"),
                              (garbage, "not a TokenButler predictor file"), (tmp_path, "Is a directory")]:
        with pytest.raises(crosscheck.CrosscheckError, match=reason):
            crosscheck.TokenButlerReference({"keep": "0.5", "predictor": str(predictor)}, model)
    truncated.write_bytes(data[:4])
    with pytest.raises(crosscheck.CrosscheckError, match="no header length"):
        crosscheck.TokenButlerReference({"keep": "0.5", "predictor": str(truncated)}, model)
    for options, reason in [({"profile": str(garbage)}, "not a JSON file"),
                            ({"profile": str(profile)}, "no \"layers\""),
                            ({"profile": str(tmp_path / "missing.json")}, "No such file"),
                            ({"layers": "1-x"}, "not a list of integers"),
                            ({"layers": "1", "select": "x"}, "not one of")]:
        with pytest.raises(crosscheck.CrosscheckError, match=reason):
            crosscheck.OrthoRankReference(options, model)


@pytest.mark.runtime(6)
def test_bad_input_gives_one_line_and_a_nonzero_exit(ts_bin, tmp_path):
    model = str(find_model("stories260K.gguf"))
    cases = [
        # an option the engine rejects: its `error: ...` line, not its whole stderr
        (["-m", model, "--policy", "tokenfilter:ratio=0.3,bogus=1"], "unknown option 'bogus'"),
        # one the engine accepts and the cross-check does not cover
        (["-m", model, "--policy", "tokenfilter:ratio=0.3,select=random"], "select=random is not one of kv|k|v"),
        (["-m", model, "--policy", f"tokenbutler:keep=0.5,predictor={tmp_path / 'missing.safetensors'}"],
         "missing.safetensors"),
        (["-m", str(tmp_path / "missing.gguf")], "missing.gguf"),
    ]
    for args, reason in cases:
        res = subprocess.run([sys.executable, str(ROOT / "tools" / "crosscheck.py"), "--bin", str(ts_bin),
                              "-p", "Once upon a time, there was a little dog.", *args],
                             capture_output=True, text=True)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("crosscheck: "), (args, res.stderr)
        assert reason in lines[0] and "Traceback" not in res.stderr and not res.stdout, (args, res.stderr)
