"""Gemma 3 270M (Q4_K_M, architecture gemma3; tools/fetch_model.sh gemma3-270m) against llama.cpp through
llama-cpp-python on the same GGUF: WikiText-2 perplexity (llama.cpp's protocol, 8 windows of 512) within
0.5%, and every step of our greedy completions is llama.cpp's argmax after the same tokens, but where
llama.cpp's own top-2 margin is a near-tie. Both engines quantize activations to 8 bits before the
integer dot products; Gemma's large activations (norm weights up to 300) move either engine's logits by
up to ~2.5 from transformers' float32 forward pass of the dequantized weights (which our exact mode
matches to 0.02: tests/unit/test_reference.cpp), so near-ties may break differently: measured on these
prompts, 3 of 120 steps differ, at margins 0.006, 0.07 and 0.19."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, TS_SHARED_DIR, find_model

WIKITEXT = TS_SHARED_DIR / "data" / "wikitext2" / "wiki.test.raw"
# llama.cpp's top-2 margins below this are near-ties (either engine may pick either token).
NEAR_TIE = 0.5
PROMPTS = ["The capital of France is", "Once upon a time, there was a little", "def fibonacci(n):\n",
           "The first law of thermodynamics states that",
           "<start_of_turn>user\nName three colors.<end_of_turn>\n<start_of_turn>model\n"]


@pytest.fixture(scope="module")
def gemma():
    return find_model("gemma-3-270m-Q4_K_M.gguf")


@pytest.fixture(scope="module")
def llama_cpp():
    return pytest.importorskip("llama_cpp")


@pytest.mark.runtime(45)
def test_wikitext2_perplexity_within_half_a_percent_of_llama_cpp(ts_bin, gemma, llama_cpp, tmp_path):
    if not WIKITEXT.is_file():
        pytest.skip(f"{WIKITEXT} not found")
    ours = json.loads(subprocess.run(
        [str(ts_bin), "ppl", "-m", str(gemma), "-f", str(WIKITEXT), "-c", "512", "--chunks", "8", "-t", "2",
         "--json"], check=True, capture_output=True, text=True).stdout)
    out = tmp_path / "llamacpp.json"
    subprocess.run([sys.executable, str(ROOT / "tools" / "llamacpp_ppl.py"), "-m", str(gemma), "-f", str(WIKITEXT),
                    "-c", "512", "--chunks", "8", "-t", "2", "--json", str(out)], check=True, capture_output=True)
    theirs = json.loads(out.read_text())
    assert ours["tokens_scored"] == theirs["tokens_scored"] == 8 * 255
    assert abs(ours["ppl"] / theirs["ppl"] - 1) < 0.005, (ours["ppl"], theirs["ppl"])


@pytest.mark.runtime(30)
def test_greedy_completions_equal_llama_cpp_up_to_its_near_ties(gemma, llama_cpp):
    tokensieve = pytest.importorskip("tokensieve")
    ours = tokensieve.Model(str(gemma), threads=2)
    theirs = llama_cpp.Llama(str(gemma), n_ctx=256, n_threads=2, logits_all=True, verbose=False)
    compared = 0
    for prompt in PROMPTS:
        ids = ours.tokenize(prompt)
        assert ids == theirs.tokenize(prompt.encode(), add_bos=True, special=True), prompt
        generated = list(ours.session().generate_ids(ids, max_tokens=24, temperature=0.0, ignore_eos=True))
        theirs.reset()
        theirs.eval(ids + generated[:-1])  # llama.cpp follows our tokens: every step is compared
        for step, token in enumerate(generated):
            logits = np.array(theirs.scores[len(ids) - 1 + step])
            top2 = np.sort(logits)[-2:]
            if top2[1] - top2[0] < NEAR_TIE:
                continue
            assert token == int(logits.argmax()), f"{prompt!r}: step {step}"
            compared += 1
    assert compared >= 80  # of 120 steps: a real comparison, not near-ties skipped wholesale


@pytest.mark.runtime(15)
def test_tokenizer_equals_llama_cpp_on_wikitext_and_hard_strings(gemma, llama_cpp):
    """Gemma's SentencePiece vocabulary (262,144 pieces, byte fallback, no space prefix) against
    llama.cpp's tokenizer of the same file, with and without special-token parsing."""
    tokensieve = pytest.importorskip("tokensieve")
    if not WIKITEXT.is_file():
        pytest.skip(f"{WIKITEXT} not found")
    ours = tokensieve.Model(str(gemma), threads=1)
    theirs = llama_cpp.Llama(str(gemma), vocab_only=True, verbose=False)
    texts = [WIKITEXT.read_text(encoding="utf-8")[:60000], "", " ", "  leading and trailing  ", "\n\n\ttabs\r\n",
             "naïve café — 東京 🙂 \u200b zero-width", "\x00\x01 control \x7f", "<start_of_turn>user\nhi<end_of_turn>",
             "<unused0><mask>[multimodal]", "a" * 3000, "1234567890 3.14159 -42"]
    for text in texts:
        for special in (True, False):
            want = theirs.tokenize(text.encode(), add_bos=True, special=special)
            assert ours.tokenize(text, special=special) == want, (text[:40], special)
