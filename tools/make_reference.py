#!/usr/bin/env python3
"""Write the float32 PyTorch reference fixtures that tokensieve's C++ engine is checked against.

For each GGUF model this script

  1. tokenizes a few fixed prompts with the tokenizer stored in the same GGUF, built by HF transformers'
     GGUF tokenizer loader (BOS is added iff the GGUF says so; llama/SentencePiece files without the
     flag add it, as llama.cpp does);
  2. loads the weights with HF transformers' GGUF loader (the `gguf` package dequantizes every tensor to
     float32; for llama transformers un-permutes attn_q / attn_k back to the HF "rotate_half" layout, for
     gemma3 it subtracts the 1 llama.cpp's converter added to every norm weight) into the architecture's
     model class (`LlamaForCausalLM`, `Qwen2ForCausalLM`, `Gemma3ForCausalLM`) and runs it in float32 --
     these are the logits stored in the fixture;
  3. independently re-loads the raw GGUF tensors with `gguf.quants.dequantize` (no un-permutation, norm
     weights as stored) and runs the small hand-written NumPy forward pass of tools/numpy_llama.py, which
     applies RoPE to adjacent pairs for llama (NeoX pairs for qwen2/gemma3), the way llama.cpp does for
     the GGUF layout, in float32 and in float64; the float64 run is the
     "exact" answer against which the float32 numbers are measured (HF's own RMSNorm/RoPE are hard-wired
     to float32, so the HF model cannot simply be cast to float64);
  4. greedy-decodes a continuation (argmax each step, full recompute, float32 HF model) and checks that
     the float64 path picks the same tokens;
  5. optionally (if llama-cpp-python is importable) checks that llama.cpp tokenizes every prompt to the
     same ids and records how far llama.cpp's logits (quantized activations in its integer dot products)
     are from the float64 reference -- this is only informative, nothing in the fixture comes from it.

Usage:
    python3 tools/make_reference.py                      # both default models
    python3 tools/make_reference.py --model path/to/x.gguf [--out tests/fixtures/reference]
    python3 tools/make_reference.py --model models/gemma-3-270m-Q4_K_M.gguf   # (tools/fetch_model.sh gemma3-270m)

Prompts are defined per model file stem in PROMPTS below. See docs/reference.md for the fixture format
and the comparison tolerances.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import importlib.metadata as _im
import json
import math
import os
import platform
import shlex
import sys
import time
import warnings

import numpy as np
import torch

from numpy_llama import NumpyLlama, load_raw_tensors, read_metadata

FORMAT = "tokensieve-reference-v1"
N_SUBSET = 256
N_GREEDY = 32

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODELS = [
    "/work/shared/models/stories260K.gguf",
    os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
]
DEFAULT_OUT = os.path.join(REPO, "tests", "fixtures", "reference")

# A paragraph of prose, the long prompt of the models that read English.
DANUBE = (
    "The Danube is the second-longest river in Europe, after the Volga. It rises in the Black "
    "Forest of Germany and flows for about 2,850 kilometres through Central and Eastern Europe "
    "before emptying into the Black Sea. Along its course it passes through ten countries and "
    "four capital cities, including Vienna, Bratislava, Budapest and Belgrade. Since ancient "
    "times the river has been an important trade route, and it formed a long stretch of the "
    "northern frontier of the Roman Empire."
)

PROMPTS = {
    "stories260K": [
        {"name": "once_upon_a_time", "text": "Once upon a time"},
        {"name": "little_dog", "text": "The little dog"},
        {
            "name": "story_long",
            "text": (
                "Tom and his sister Mia went to the park with their mom. They saw a big tree "
                "and a small bird. The bird was sad because it could not fly."
            ),
        },
    ],
    "SmolLM2-135M-Instruct.Q4_1": [
        {"name": "plain_sentence", "text": "The quick brown fox jumps over the lazy dog."},
        {
            "name": "chatml_capital_of_france",
            "text": "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        },
        {
            "name": "wiki_paragraph",
            "text": DANUBE,
        },
    ],
    "Qwen2.5-Coder-0.5B-Instruct": [
        {
            "name": "chatml_square_function",
            "text": "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                    "<|im_start|>user\nWrite a Python function that returns the square of a number.<|im_end|>\n"
                    "<|im_start|>assistant\n",
        },
        {
            "name": "chatml_capital_of_france",
            "text": "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        },
        {"name": "code_prefix", "text": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"},
    ],
    # a base model without a chat template in the file; the turn markers are single special tokens all the same
    "gemma-3-270m-Q4_K_M": [
        {"name": "plain_sentence", "text": "The quick brown fox jumps over the lazy dog."},
        {
            "name": "turns_capital_of_france",
            "text": "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
        },
        {
            "name": "wiki_paragraph",
            "text": DANUBE,
        },
    ],
}

# Published greedy outputs to reproduce (stem -> prompt name, expected decoded text from BOS + prompt).
KNOWN_ANSWERS = {
    "stories260K": (
        "once_upon_a_time",
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
        "she saw a big, red ball. She wanted to play with it, but it was too high.",
        "llama2.c doc/stories260K.md (quoted in /work/shared/models/README.md)",
    ),
}

UINT32_NONE = 0xFFFFFFFF  # llama.cpp writes "no such token" as -1 / UINT32_MAX


# ----------------------------------------------------------------------------------------------------
# small helpers


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pkg_version(name: str) -> str | None:
    try:
        return _im.version(name)
    except _im.PackageNotFoundError:
        return None


def fnum(x: float, sig: int) -> float:
    """Round to `sig` significant digits so json writes a short repr."""
    x = float(x)
    if x == 0.0 or not math.isfinite(x):
        return x
    return float(f"{x:.{sig}g}")


# ----------------------------------------------------------------------------------------------------
# tokenizer: transformers' GGUF tokenizer loader


def _patch_transformers_gguf_metadata():
    """transformers indexes the token list with every *_token_id key; llama.cpp's "none" (UINT32_MAX, as in
    stories260K's padding/separator ids) makes that an IndexError. Drop those keys before it sees them."""
    import transformers.integrations.gguf.reader as reader

    if getattr(reader.read_gguf_metadata, "_tokensieve_patched", False):
        return
    original = reader.read_gguf_metadata

    def patched(path, string_arrays=()):
        metadata, names = original(path, string_arrays)
        for key in list(metadata):
            if key.startswith("tokenizer.ggml.") and key.endswith("_token_id") and metadata[key] == UINT32_NONE:
                del metadata[key]
        return metadata, names

    patched._tokensieve_patched = True
    reader.read_gguf_metadata = patched


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    _patch_transformers_gguf_metadata()
    return AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))


def expected_add_bos(meta: dict) -> bool:
    """llama.cpp's rule: the GGUF flag if present, else true for SentencePiece ("llama") vocabularies."""
    if "tokenizer.ggml.add_bos_token" in meta:
        return bool(meta["tokenizer.ggml.add_bos_token"])
    return meta.get("tokenizer.ggml.model") == "llama"


# ----------------------------------------------------------------------------------------------------
# model A: transformers LlamaForCausalLM with transformers' GGUF weight loader


def load_hf_model(path: str):
    """Returns (model, how). Same as AutoModelForCausalLM.from_pretrained(dir, gguf_file=name,
    torch_dtype=float32): for llama, qwen2 and gemma3 transformers 5.x uses its "legacy" GGUF loader
    (`load_gguf_checkpoint`: gguf.dequantize + reverse permutation of llama's attn_q/attn_k, gemma3's norm
    weights minus 1). from_pretrained insists on `accelerate` for GGUF files, so without it we make the same
    calls ourselves."""
    from transformers import AutoConfig, AutoModelForCausalLM

    d, name = os.path.dirname(path), os.path.basename(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AutoConfig.from_pretrained(d, gguf_file=name)
    if config.pad_token_id is not None and not (0 <= config.pad_token_id < config.vocab_size):
        config.pad_token_id = None  # UINT32_MAX in stories260K: "no padding token"
    config._attn_implementation = "eager"

    try:
        import accelerate  # noqa: F401

        model = AutoModelForCausalLM.from_pretrained(
            d, gguf_file=name, config=config, dtype=torch.float32, attn_implementation="eager"
        )
        how = "AutoModelForCausalLM.from_pretrained(dir, gguf_file=name, dtype=float32)"
    except ImportError:
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

        model = AutoModelForCausalLM.from_config(config).to(torch.float32)
        state = load_gguf_checkpoint(path, return_tensors=True, model_to_load=model, torch_dtype=torch.float32)
        tensors = state["tensors"]
        missing, unexpected = model.load_state_dict(tensors, strict=False)
        allowed_missing = {"lm_head.weight"} if config.tie_word_embeddings else set()
        missing = [m for m in missing if "rotary_emb" not in m]
        if set(missing) - allowed_missing or unexpected:
            raise RuntimeError(f"GGUF -> HF state dict mismatch: missing={missing} unexpected={unexpected}")
        if config.tie_word_embeddings:
            model.tie_weights()
            assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        how = (f"{type(model).__name__}(AutoConfig.from_pretrained(dir, gguf_file=name)) + "
               "transformers.modeling_gguf_pytorch_utils.load_gguf_checkpoint(path, return_tensors=True) "
               "(what from_pretrained(gguf_file=...) does for llama; accelerate not installed)")
    model.eval()
    return model, how


@torch.no_grad()
def hf_logits(model, ids: list[int]) -> torch.Tensor:
    out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].to(torch.float32)


# ----------------------------------------------------------------------------------------------------
# model B: raw GGUF tensors in llama.cpp's layout (forward pass: tools/numpy_llama.py)


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of llama.cpp convert_hf_to_gguf.py LlamaModel.permute(): GGUF rows of a head are ordered
    (x0, x_{d/2}, x1, x_{d/2+1}, ...) [adjacent RoPE pairs]; HF wants (x0..x_{d/2-1}, x_{d/2}..x_{d-1})."""
    d2 = w.shape[0] // n_head // 2
    return w.reshape(n_head, d2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# ----------------------------------------------------------------------------------------------------
# optional llama.cpp cross-check


def llamacpp_check(path: str, prompts: list[dict], ref64: list[torch.Tensor], add_bos: bool):
    try:
        import llama_cpp
    except ImportError:
        return {"available": False}
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, logits_all=True, verbose=False,
                          n_threads=2, seed=0)
    res = {"available": True, "llama_cpp_python": pkg_version("llama_cpp_python"), "prompts": []}
    all_match = True
    worst = 0.0
    for p, r64 in zip(prompts, ref64):
        ids = llm.tokenize(p["text"].encode("utf-8"), add_bos=add_bos, special=True)
        match = list(ids) == p["input_ids"]
        all_match &= match
        item = {"name": p["name"], "tokens_match": match}
        if not match:
            item["llamacpp_ids"] = list(ids)
        llm.reset()
        llm.eval(p["input_ids"])
        lg = torch.from_numpy(np.array(llm.scores[: len(p["input_ids"])], dtype=np.float64))
        diff = (lg - r64).abs()
        lp = lg - torch.logsumexp(lg, -1, keepdim=True)
        lp64 = r64 - torch.logsumexp(r64, -1, keepdim=True)
        item.update({
            "max_abs_logit_diff": float(diff.max()),
            "mean_abs_logit_diff": float(diff.mean()),
            "rms_logit_diff": float(diff.pow(2).mean().sqrt()),
            "max_abs_logprob_diff_at_argmax": float((lp - lp64).gather(1, r64.argmax(1, keepdim=True)).abs().max()),
            "argmax_agree": int((lg.argmax(1) == r64.argmax(1)).sum()),
            "positions": len(p["input_ids"]),
            "max_logit_range": float((r64.max(1).values - r64.min(1).values).max()),
        })
        worst = max(worst, item["max_abs_logit_diff"])
        res["prompts"].append(item)
    res["tokens_match_all"] = all_match
    res["max_abs_logit_diff"] = worst
    del llm
    return res


# ----------------------------------------------------------------------------------------------------


def vocab_subset(n_vocab: int, interesting: list[int]) -> list[int]:
    """256 fixed ids: the ids used by the prompts and greedy continuations (first-seen order, at most 128),
    then evenly strided ids 0, s, 2s, ... until 256 distinct ids; returned sorted."""
    if n_vocab <= N_SUBSET:
        return list(range(n_vocab))
    chosen: list[int] = []
    for t in interesting:
        if t not in chosen and len(chosen) < N_SUBSET // 2:
            chosen.append(t)
    stride = n_vocab / N_SUBSET
    k = 0
    while len(chosen) < N_SUBSET:
        t = int(k * stride) % n_vocab
        if t not in chosen:
            chosen.append(t)
        k += 1
        if k > 4 * N_SUBSET:  # fall back to consecutive ids
            for t in range(n_vocab):
                if len(chosen) >= N_SUBSET:
                    break
                if t not in chosen:
                    chosen.append(t)
    return sorted(chosen)


def greedy(step_logits, ids: list[int], n: int):
    seq = list(ids)
    new, margins = [], []
    for _ in range(n):
        lg = step_logits(seq)[-1].to(torch.float64)
        top2 = torch.topk(lg, 2).values
        t = int(lg.argmax())
        new.append(t)
        margins.append(float(top2[0] - top2[1]))
        seq.append(t)
    return new, margins


# gemma3: HF's norm names -> GGUF's (HF computes x * (1 + w); llama.cpp's converter stores w + 1)
GEMMA3_NORMS = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
}


def gemma3_checks(model, sd: dict, raw: dict[str, np.ndarray], own: NumpyLlama) -> float:
    """transformers' gemma3 config must describe the model tools/numpy_llama.py computes (window, which
    layers are local, both RoPE bases, attention scale, no soft-capping); returns max |(HF norm weight + 1)
    - GGUF norm weight| in float32 (the subtraction of 1 by the loader may round)."""
    c = model.config
    layer_types = ["sliding_attention" if l in own.swa_layers else "full_attention" for l in range(own.n_layer)]
    rope = c.rope_parameters
    expect = {
        "sliding_window": (c.sliding_window, own.sliding_window),
        "layer_types": (list(c.layer_types), layer_types),
        "rope_theta full": (rope["full_attention"]["rope_theta"], own.rope_base),
        "rope_theta sliding": (rope["sliding_attention"]["rope_theta"], own.rope_base_swa),
        "head_dim": (c.head_dim, own.head_dim),
        "query_pre_attn_scalar": (c.query_pre_attn_scalar, own.head_dim),
        "hidden_activation": (c.hidden_activation, "gelu_pytorch_tanh"),
        "softcapping": ((c.attn_logit_softcapping, c.final_logit_softcapping), (None, None)),
        "rope_type": ((rope["full_attention"]["rope_type"], rope["sliding_attention"]["rope_type"]),
                      ("default", "default")),
    }
    bad = {k: v for k, v in expect.items() if v[0] != v[1]}
    if bad:
        raise RuntimeError(f"transformers' gemma3 config differs from the GGUF's conventions: {bad}")
    if float(model.model.embed_tokens.embed_scale) != own.embed_scale:
        raise RuntimeError(f"embedding scale {float(model.model.embed_tokens.embed_scale)} != {own.embed_scale}")
    pairs = [(f"model.layers.{l}.{hf}.weight", f"blk.{l}.{gg}.weight")
             for l in range(own.n_layer) for hf, gg in GEMMA3_NORMS.items()]
    pairs.append(("model.norm.weight", "output_norm.weight"))
    return max(float(np.abs((sd[h].numpy() + np.float32(1)) - raw[g]).max()) for h, g in pairs)


def arch_fields(own: NumpyLlama) -> dict:
    """Extra `model` fields for the architectures after llama/qwen2 (the names of tools/tiny_archs.py's)."""
    if own.arch in ("llama", "qwen2"):
        return {}
    return {
        "rope_dim": own.n_rot,
        "sliding_window": own.sliding_window or None,
        "swa_layers": own.swa_layers,
        "rope_freq_base_swa": own.rope_base_swa,
        "qk_norm": own.qk_norm,
        "post_norms": own.post_norms,
        "embedding_scale": own.embed_scale,
        "ffn_activation": own.ffn_act,
        "fused_qkv": False,
        "fused_gate_up": False,
        "norm_weights_plus_one": own.arch == "gemma3",
        "qk_rows_permuted": False,
        "hf_family": own.arch,
    }


def make_fixture(path: str, out_dir: str, command: str, sig: int, no_llamacpp: bool) -> dict:
    t0 = time.time()
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem not in PROMPTS:
        raise SystemExit(f"no prompts defined for model stem {stem!r}; add them to PROMPTS")
    meta = read_metadata(path)
    tok = load_tokenizer(path)
    add_bos = expected_add_bos(meta)
    bos = int(meta["tokenizer.ggml.bos_token_id"])

    prompts = []
    for p in PROMPTS[stem]:
        ids = tok(p["text"], add_special_tokens=True)["input_ids"]
        plain = tok(p["text"], add_special_tokens=False)["input_ids"]
        if ids != ([bos] if add_bos else []) + plain:
            raise RuntimeError(f"{stem}: HF tokenizer special tokens {ids[:3]}.. vs {plain[:3]}.. do not match the "
                               f"GGUF/llama.cpp add-BOS rule ({add_bos})")
        prompts.append({"name": p["name"], "text": p["text"], "input_ids": [int(i) for i in ids]})

    model, how = load_hf_model(path)
    raw = load_raw_tensors(path)
    own32 = NumpyLlama(raw, meta, np.float32)
    own64 = NumpyLlama(raw, meta, np.float64)

    # weight cross-check: transformers' un-permuted q/k must equal our unpermute_qk of the raw GGUF rows
    # (llama; qwen2's converter stores them unpermuted, for NeoX RoPE)
    sd = model.state_dict()
    wdiff = 0.0
    unpermute = unpermute_qk if not own32.neox else (lambda w, n_head: w)
    for l in range(own32.n_layer):
        q_hf = sd[f"model.layers.{l}.self_attn.q_proj.weight"].numpy()
        k_hf = sd[f"model.layers.{l}.self_attn.k_proj.weight"].numpy()
        wdiff = max(wdiff, float(np.abs(q_hf - unpermute(raw[f"blk.{l}.attn_q.weight"], own32.n_head)).max()))
        wdiff = max(wdiff, float(np.abs(k_hf - unpermute(raw[f"blk.{l}.attn_k.weight"], own32.n_head_kv)).max()))
        wdiff = max(wdiff, float(np.abs(sd[f"model.layers.{l}.mlp.down_proj.weight"].numpy()
                                        - raw[f"blk.{l}.ffn_down.weight"]).max()))
    wdiff = max(wdiff, float(np.abs(sd["lm_head.weight"].numpy() - own32.w["output.weight"]).max()))
    if wdiff != 0.0:
        raise RuntimeError(f"{stem}: transformers' GGUF weights differ from gguf.dequantize + unpermute: {wdiff}")
    norm_diff = gemma3_checks(model, sd, raw, own32) if own32.arch == "gemma3" else None

    n_vocab = int(model.config.vocab_size)
    per_prompt, stats = [], []
    interesting: list[int] = []
    ref64_full = []
    for p in prompts:
        ids = p["input_ids"]
        l32 = hf_logits(model, ids)
        o32 = torch.from_numpy(own32.logits(ids))
        o64 = torch.from_numpy(own64.logits(ids))
        ref64_full.append(o64)
        g_ids, g_marg = greedy(lambda s: hf_logits(model, s), ids, N_GREEDY)
        g64_ids, g64_marg = greedy(lambda s: torch.from_numpy(own64.logits(s, last_only=True)), ids, N_GREEDY)
        interesting += ids + g_ids
        lse64 = torch.logsumexp(o64, -1, keepdim=True)
        lse32 = torch.logsumexp(l32.double(), -1, keepdim=True)
        st = {
            "name": p["name"],
            "positions": len(ids),
            "hf32_vs_f64_max_abs_logit_diff": float((l32.double() - o64).abs().max()),
            "hf32_vs_f64_max_abs_logprob_diff": float(((l32.double() - lse32) - (o64 - lse64)).abs().max()),
            "own32_vs_f64_max_abs_logit_diff": float((o32.double() - o64).abs().max()),
            "hf32_vs_own32_max_abs_logit_diff": float((l32 - o32).abs().max()),
            "logit_abs_max": float(o64.abs().max()),
            "argmax_agree_hf32_f64": bool((l32.double().argmax(1) == o64.argmax(1)).all()),
            "greedy_agree_hf32_f64": g_ids == g64_ids,
            "greedy_min_margin": min(g_marg),
        }
        stats.append(st)
        per_prompt.append((p, l32, g_ids, g_marg))

    known = None
    if stem in KNOWN_ANSWERS:
        pname, expected, source = KNOWN_ANSWERS[stem]
        ids = next(p["input_ids"] for p in prompts if p["name"] == pname)
        seq, text = list(ids), ""
        for _ in range(256):  # greedy (float32 HF, KV-free full recompute) until the expected text is covered
            seq.append(int(hf_logits(model, seq)[-1].argmax()))
            text = tok.decode(seq, skip_special_tokens=True)
            if len(text) >= len(expected) or seq[-1] == int(meta["tokenizer.ggml.eos_token_id"]):
                break
        ok = text.startswith(expected)
        known = {"prompt": pname, "expected": expected, "source": source, "got": text,
                 "n_generated": len(seq) - len(ids), "match": ok}
        print(f"  known answer [{pname}]: {'MATCH' if ok else 'MISMATCH'}: {text!r}")
        if not ok:
            print(f"  expected: {expected!r}", file=sys.stderr)

    subset = vocab_subset(n_vocab, interesting)
    sub_idx = torch.tensor(subset)
    prompts_out = []
    for p, l32, g_ids, g_marg in per_prompt:
        lg = l32.double()
        top2 = torch.topk(lg, 2, dim=-1).values
        prompts_out.append({
            "name": p["name"],
            "text": p["text"],
            "parse_special": True,
            "add_bos": add_bos,
            "n_tokens": len(p["input_ids"]),
            "input_ids": p["input_ids"],
            "input_pieces": tok.convert_ids_to_tokens(p["input_ids"]),
            "logits_subset": [[fnum(v, sig) for v in row] for row in lg[:, sub_idx].tolist()],
            "argmax": [int(v) for v in lg.argmax(-1).tolist()],
            "max_logit": [fnum(v, sig) for v in lg.max(-1).values.tolist()],
            "logsumexp": [fnum(v, sig) for v in torch.logsumexp(lg, -1).tolist()],
            "top2_gap": [fnum(v, 4) for v in (top2[:, 0] - top2[:, 1]).tolist()],
            "greedy": {
                "n_new": N_GREEDY,
                "method": "argmax of the float32 logits of the last position, full recompute each step, no EOS stop",
                "tokens": g_ids,
                "margins": [fnum(v, 4) for v in g_marg],
                "text": tok.decode(g_ids, skip_special_tokens=False),
                "full_text": tok.decode(p["input_ids"] + g_ids, skip_special_tokens=True),
            },
        })

    llcpp = {"available": False, "skipped": True} if no_llamacpp else llamacpp_check(path, prompts, ref64_full, add_bos)

    arch = meta["general.architecture"]
    fixture = {
        "format": FORMAT,
        "model": {
            "file": os.path.basename(path),
            "sha256": sha256_file(path),
            "size_bytes": os.path.getsize(path),
            "architecture": arch,
            "name": meta.get("general.name"),
            "n_vocab": n_vocab,
            "n_layer": own32.n_layer,
            "n_embd": own32.n_embd,
            "n_head": own32.n_head,
            "n_head_kv": own32.n_head_kv,
            "head_dim": own32.head_dim,
            "n_ff": int(meta[f"{arch}.feed_forward_length"]),
            "rope_freq_base": own32.rope_base,
            "rms_eps": own32.eps,
            "tied_output": own32.tied_output,
            "tokenizer_model": meta.get("tokenizer.ggml.model"),
            "bos_id": bos,
            "eos_id": int(meta["tokenizer.ggml.eos_token_id"]),
            "add_bos": add_bos,
            "gguf_add_bos_token": meta.get("tokenizer.ggml.add_bos_token"),
            **arch_fields(own32),
        },
        "generator": {
            "script": "tools/make_reference.py",
            "command": command,
            "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": pkg_version("transformers"),
            "gguf": pkg_version("gguf"),
            "numpy": np.__version__,
            "tokenizers": pkg_version("tokenizers"),
            "reference": f"HF transformers {type(model).__name__}, float32, eager attention; weights via " + how,
            "tokenizer": "transformers AutoTokenizer.from_pretrained(dir, gguf_file=name) (tokenizer from the same GGUF)",
            "float_digits": sig,
            "seconds": None,
        },
        "vocab_subset": subset,
        "checks": {
            "weights_hf_vs_gguf_dequant_unpermuted_max_abs": wdiff,
            **({} if norm_diff is None else {"weights_hf_norm_plus_one_vs_gguf_max_abs": norm_diff}),
            "per_prompt": stats,
            "hf32_vs_f64_max_abs_logit_diff": max(s["hf32_vs_f64_max_abs_logit_diff"] for s in stats),
            "hf32_vs_f64_max_abs_logprob_diff": max(s["hf32_vs_f64_max_abs_logprob_diff"] for s in stats),
            "own32_vs_f64_max_abs_logit_diff": max(s["own32_vs_f64_max_abs_logit_diff"] for s in stats),
            "known_answer": known,
            "llamacpp": llcpp,
        },
        "prompts": prompts_out,
    }
    fixture["generator"]["seconds"] = round(time.time() - t0, 1)

    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, stem + ".json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    size = os.path.getsize(out)
    print(f"wrote {out} ({size} bytes, {fixture['generator']['seconds']} s)")
    for po, st in zip(prompts_out, stats):
        print(f"  [{po['name']}] {po['n_tokens']} tokens; hf32-vs-f64 max|dlogit|={st['hf32_vs_f64_max_abs_logit_diff']:.3g}"
              f" greedy agree={st['greedy_agree_hf32_f64']} min margin={st['greedy_min_margin']:.3g}")
        print(f"    -> {po['greedy']['full_text']!r}")
    if llcpp.get("available"):
        print(f"  llama.cpp: tokens match={llcpp['tokens_match_all']} max|dlogit| vs f64={llcpp['max_abs_logit_diff']:.3g}")
    if size >= 300 * 1024:
        print(f"WARNING: {out} is {size} bytes (>= 300 KB)", file=sys.stderr)
    return fixture


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", help="GGUF file (repeatable); default: the two project models")
    ap.add_argument("--out", default=DEFAULT_OUT, help="output directory (default tests/fixtures/reference)")
    ap.add_argument("--digits", type=int, default=6, help="significant digits of stored logits (default 6)")
    ap.add_argument("--no-llamacpp", action="store_true", help="skip the optional llama-cpp-python cross-check")
    args = ap.parse_args()
    torch.manual_seed(0)
    command = "python3 " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:])
    for path in args.model or DEFAULT_MODELS:
        make_fixture(path, args.out, command, args.digits, args.no_llamacpp)


if __name__ == "__main__":
    main()
