"""Our token ids (through `tokensieve tokenize`) against HF `tokenizers` configured from the same
GGUF by tools/hf_tokenizer_from_gguf.py, on all of WikiText-2 test and adversarial strings; and
the pre-tokenizers (through ts_tests) against HF's own pre-tokenizers, Llama 3 and Qwen2 included.
"""
import json
import os
import random
import subprocess
import sys

import pytest

from conftest import ROOT, TS_SHARED_DIR, find_model

pytest.importorskip("gguf")
pytest.importorskip("tokenizers")
sys.path.insert(0, str(ROOT / "tools"))
import hf_tokenizer_from_gguf as hf  # noqa: E402

MODELS = {"stories260K": "stories260K.gguf", "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf"}
WIKITEXT = TS_SHARED_DIR / "data" / "wikitext2" / "wiki.test.raw"

ADVERSARIAL = [
    "", " ", "  ", "   ", "\t", "\n", "\r\n", " \n ", "\n\n\n", "\t\t x", "a\r\nb", "x \t\n y", "   leading",
    "trailing   ", "Hello world", "Hello  world", " Hello", "hello\u3000world", "non\u00a0breaking",
    "line\u2028sep", "nel\u0085x", "\x0b\x0c\x1c\x1d",
    "1234567890", "3.14159", "12,345,678", "a1b22c333d4444", "\u00b2\u00b3\u00bd \u0663\u0664 \u2167",
    "I'm", "you're", "it's", "We'LL", "they've", "I'D", "'s'S'\u017f", "don't", "''quoted''",
    "\U0001F600", "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\U0001F1FA\U0001F1F8", "\U0001F44D\U0001F3FD ok",
    "中文字符测试", "日本語のテキスト", "한국어 텍스트", "Привет, мир!", "مرحبا بالعالم", "שלום", "हिन्दी",
    "e\u0301 a\u0300\u0301 \u0915\u094d\u0937", "Z\u0351\u036b\u0343a\u0350l\u0351g\u0352o",
    "\ufeffBOM", "zero\u200bwidth", "\u2581already\u2581marked", "<0x41>", "<s>", "</s>", "<unk>",
    "<|im_start|>user\nHi<|im_end|>\n", "<|im_start|>", "<|im_start|><|im_end|>", "<|im_start|",
    "<|endoftext|>text<|endoftext|>", "<s>hello</s>", "x<s>y", "<<|im_start|>>",
    "\x00null\x00", "\x7f\x01\x02", "\ufffd", "\U0010ffff\U000e0001", "\U00011de0\u1c89",
    "def f(x):\n    return x**2  # comment\n", '{"json": [1, 2, 3]}', "https://example.com/a?b=c&d=e",
    "!!!???...", "a" * 300, " " * 50 + "x", "\n" * 20, "ab" * 100, "A.B.C. D-E-F", "$100.00 & 50%",
]

_references = {}


def reference(path):
    if path not in _references:
        _references[path] = hf.build(str(path))
    return _references[path]


def hf_ids(path, text, parse_special):
    tok, add_bos = reference(path)
    tok.encode_special_tokens = not parse_special
    return tok.encode(text, add_special_tokens=add_bos).ids


def our_ids(ts_bin, path, text_file, parse_special):
    cmd = [str(ts_bin), "tokenize", "-m", str(path), "-f", str(text_file)] + ([] if parse_special else ["--no-special"])
    out = subprocess.run(cmd, capture_output=True, check=True)
    return json.loads(out.stdout)


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@pytest.mark.runtime(10)
@pytest.mark.parametrize("model", MODELS)
def test_wikitext2_ids_match_hf(ts_bin, model):
    path = find_model(MODELS[model])
    if not WIKITEXT.is_file():
        pytest.skip(f"{WIKITEXT} not found")
    text = WIKITEXT.read_text(encoding="utf-8")
    expected = hf_ids(path, text, True)
    ours = our_ids(ts_bin, path, WIKITEXT, True)
    i = first_difference(ours, expected)
    assert ours == expected, f"first difference at token {i}: ours {ours[i:i + 8]} HF {expected[i:i + 8]}"


@pytest.mark.runtime(60)
@pytest.mark.parametrize("model", MODELS)
def test_adversarial_ids_match_hf(ts_bin, model, tmp_path):
    path = find_model(MODELS[model])
    failures = []
    for n, text in enumerate(ADVERSARIAL):
        text_file = tmp_path / f"{n}.txt"
        text_file.write_bytes(text.encode("utf-8"))
        # Plain-text handling of special-token text only matters where there is some.
        for parse_special in (True, False) if "<" in text else (True,):
            expected = hf_ids(path, text, parse_special)
            ours = our_ids(ts_bin, path, text_file, parse_special)
            if ours != expected:
                failures.append(f"{text!r} parse_special={parse_special}: ours {ours[:16]} HF {expected[:16]}")
    assert not failures, "\n".join(failures)


def random_strings(n, seed):
    alphabet = list(" \t\n\r\x0b\x0c\x85\xa0\u2028\u3000'sStTrReEvVmMlLdD\u017f0123456789\u00b2\u0663\u2167"
                    "abcXYZ!?.,-_/\\\"#é\u0301中😀\U0001F1FA\u200d\ufeff\u1c89\U00011de0\x00")
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(n)]


@pytest.mark.runtime(20)
def test_pretokenizers_match_hf(ts_test_bin, tmp_path):
    """Llama 3 and Qwen2 have no vocabulary here, so their splits are checked on their own."""
    texts = ADVERSARIAL + random_strings(2000, seed=1)
    if WIKITEXT.is_file():
        texts += WIKITEXT.read_text(encoding="utf-8").split("\n")[:2000]
    cases = []
    for pre in ("llama3", "qwen2", "smollm", "gpt2"):
        splitter = hf.pre_tokenizer(pre)
        for text in texts:
            pieces = [hf.unspell(p) for p, _ in splitter.pre_tokenize_str(text)]
            cases.append({"pre": pre, "text": text, "pieces": pieces})
    case_file = tmp_path / "pretok_cases.json"
    case_file.write_text(json.dumps(cases), encoding="utf-8")
    out = subprocess.run([str(ts_test_bin), "--gtest_filter=TokenizerPretok.MatchesHfCasesFromFile"],
                         env=dict(os.environ, TS_PRETOK_CASES=str(case_file)), capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:]
    assert "[  PASSED  ] 1 test" in out.stdout, out.stdout[-4000:]
