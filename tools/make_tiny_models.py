#!/usr/bin/env python3
"""Write tiny random-weight GGUF models and their PyTorch/transformers reference fixtures.

The real models checked by tools/make_reference.py are both `llama`. This script covers what they do not:

  * `tiny-qwen2`       arch qwen2: Q/K/V bias, NeoX RoPE pairs (x[i], x[i+d/2]), GQA with 2 KV heads, tied
                       output, F32 weights;
  * `tiny-qwen2-quant` the same float weights with the matrices stored as Q8_0 / Q4_0 / Q4_1 (token
                       embedding Q8_0, norms and biases F32); the reference uses the dequantized numbers;
  * `tiny-llama3`      arch llama with Llama 3.1 ("llama3") RoPE scaling expressed the way llama.cpp's
                       convert_hf_to_gguf.py does: a `rope_freqs.weight` tensor of per-frequency divisors and
                       no rope.scaling.* keys; GGUF attn_q/attn_k rows permuted (HF -> GGUF) as that converter
                       does; untied output.

For each model it (1) draws HF-layout float32 weights from a fixed numpy seed, (2) writes the GGUF with
gguf.GGUFWriter (permuting llama's Q/K rows, quantizing where asked), (3) reads the GGUF back with
gguf.GGUFReader + gguf.quants.dequantize and loads exactly those numbers (un-permuted for llama) into
transformers' Qwen2ForCausalLM / LlamaForCausalLM (rope_parameters {"rope_type": "llama3", ...}), whose
float32 logits go to the fixture, and (4) cross-checks them with an independent float64 forward pass on the
raw GGUF rows in llama.cpp's conventions (adjacent pairs for llama, NeoX pairs for qwen2, frequency divided
by rope_freqs) and, if llama-cpp-python is importable, with llama.cpp itself (informative only).
It also records how far three classic mistakes would move the logits (sensitivity of the fixture).

Tokenizer: `gpt2` model, 256 tokens = the 256 bytes in GPT-2's byte-level spelling, token id = byte value,
no BOS. tokensieve and llama.cpp require tokenizer.ggml.merges, so it holds one merge ("Ġ Ġ") whose result
is not in the vocabulary and therefore never applies: any text tokenizes to its bytes.

The GGUF files (< 200 KB each) are committed under tests/fixtures/models/, the fixtures under
tests/fixtures/reference/ (format tokensieve-reference-v1, see docs/reference.md §3). Everything is
deterministic except the generator's date and timing fields.

Usage:  python3 tools/make_tiny_models.py [--only NAME] [--no-llamacpp]
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

import gguf
from gguf_vocab import byte_alphabet

FORMAT = "tokensieve-reference-v1"
N_GREEDY = 32
DIGITS = 6
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.path.join(REPO, "tests", "fixtures", "models")
FIXTURES_DIR = os.path.join(REPO, "tests", "fixtures", "reference")

Q = gguf.GGMLQuantizationType
# Quantized variant: one type per matrix, so every type meets every role at least once.
QUANT_TYPES = {
    "token_embd": Q.Q8_0,
    "attn_q": Q.Q4_0,
    "attn_k": Q.Q4_1,
    "attn_v": Q.Q8_0,
    "attn_output": Q.Q4_1,
    "ffn_gate": Q.Q4_0,
    "ffn_up": Q.Q8_0,
    "ffn_down": Q.Q4_1,
}

QWEN2 = dict(arch="qwen2", n_layer=2, n_embd=32, n_head=4, n_head_kv=2, n_ff=64, n_ctx=512, rope_base=10000.0,
             rms_eps=1e-6, tied=True, pre="qwen2", rope_scaling=None, seed=20261122)
# Llama 3.1 scaling: factor/low/high as Meta's, original context 32 so that at base 500 and head_dim 16
# the 8 frequencies fall in all three bands: pair 0 unchanged (wavelength 6.3 < 32/4), pairs 1-2 smoothed
# (13.6, 29.5), pairs 3-7 divided by 8 (64 .. 1400 > 32); prompts + continuations reach position 80.
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 32}
MODELS = {
    "tiny-qwen2": dict(QWEN2, quant=False),
    "tiny-qwen2-quant": dict(QWEN2, quant=True),
    "tiny-llama3": dict(arch="llama", n_layer=2, n_embd=32, n_head=2, n_head_kv=1, n_ff=64, n_ctx=512,
                        rope_base=500.0, rms_eps=1e-5, tied=False, pre="llama-bpe", rope_scaling=LLAMA3_SCALING,
                        quant=False, seed=20261124),
}

# The seeds were picked (by trying a few) so that every greedy step's top-1 - top-2 margin is >= MIN_MARGIN:
# tests/unit/test_reference.cpp requires identical greedy tokens with a logit tolerance of 0.05.
MIN_MARGIN = 0.1

PROMPTS = [
    {"name": "short", "text": "Hello, world!"},
    {"name": "long", "text": "The quick brown fox jumps over the lazy dog twice"},
]


# ----------------------------------------------------------------------------------------------------
# helpers


def sha256_file(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def pkg_version(name: str) -> str | None:
    try:
        return _im.version(name)
    except _im.PackageNotFoundError:
        return None


def fnum(x: float, sig: int) -> float:
    x = float(x)
    if x == 0.0 or not math.isfinite(x):
        return x
    return float(f"{x:.{sig}g}")


def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute: HF rotate_half rows -> adjacent RoPE pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    d2 = w.shape[0] // n_head // 2
    return w.reshape(n_head, d2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(base: float, dim: int, s: dict) -> np.ndarray:
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors for rope_type llama3 (float32 freqs, like it)."""
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, lo, hi = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    low_wl, high_wl = old / lo, old / hi
    out = []
    for f in freqs.tolist():
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


# ----------------------------------------------------------------------------------------------------
# weights and GGUF


def hf_weights(spec: dict) -> dict[str, np.ndarray]:
    """Random HF-layout weights (nn.Linear: [out, in]). Scales give attention scores and logits of a few
    units, so RoPE, bias and norm mistakes show and greedy steps are not near-ties."""
    rng = np.random.default_rng(spec["seed"])
    d, f, hd = spec["n_embd"], spec["n_ff"], spec["n_embd"] // spec["n_head"]
    kv = spec["n_head_kv"] * hd

    def mat(rows, cols, gain):
        return (rng.standard_normal((rows, cols)) * gain / math.sqrt(cols)).astype(np.float32)

    def norm():
        return (1.0 + 0.2 * rng.standard_normal(d)).astype(np.float32)

    w = {"model.embed_tokens.weight": rng.standard_normal((256, d)).astype(np.float32)}
    for l in range(spec["n_layer"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = norm()
        w[p + "self_attn.q_proj.weight"] = mat(d, d, 1.5)
        w[p + "self_attn.k_proj.weight"] = mat(kv, d, 1.5)
        w[p + "self_attn.v_proj.weight"] = mat(kv, d, 1.0)
        if spec["arch"] == "qwen2":
            w[p + "self_attn.q_proj.bias"] = (0.5 * rng.standard_normal(d)).astype(np.float32)
            w[p + "self_attn.k_proj.bias"] = (0.5 * rng.standard_normal(kv)).astype(np.float32)
            w[p + "self_attn.v_proj.bias"] = (0.5 * rng.standard_normal(kv)).astype(np.float32)
        w[p + "self_attn.o_proj.weight"] = mat(d, d, 1.0)
        w[p + "post_attention_layernorm.weight"] = norm()
        w[p + "mlp.gate_proj.weight"] = mat(f, d, 1.0)
        w[p + "mlp.up_proj.weight"] = mat(f, d, 1.0)
        w[p + "mlp.down_proj.weight"] = mat(d, f, 1.0)
    w["model.norm.weight"] = norm()
    if not spec["tied"]:
        w["lm_head.weight"] = mat(256, d, 6.0)
    return w


GGUF_NAMES = {  # HF suffix -> GGUF suffix, per layer
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def to_gguf_tensors(spec: dict, w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """HF names/layout -> GGUF names/layout (llama: Q/K rows permuted; qwen2: as is, like the converter)."""
    out = {"token_embd.weight": w["model.embed_tokens.weight"]}
    for l in range(spec["n_layer"]):
        for hf, gg in GGUF_NAMES.items():
            t = w.get(f"model.layers.{l}.{hf}")
            if t is None:
                continue
            if spec["arch"] == "llama" and hf == "self_attn.q_proj.weight":
                t = permute_qk(t, spec["n_head"])
            elif spec["arch"] == "llama" and hf == "self_attn.k_proj.weight":
                t = permute_qk(t, spec["n_head_kv"])
            out[f"blk.{l}.{gg}"] = t
    out["output_norm.weight"] = w["model.norm.weight"]
    if not spec["tied"]:
        out["output.weight"] = w["lm_head.weight"]
    if spec["rope_scaling"]:
        hd = spec["n_embd"] // spec["n_head"]
        out["rope_freqs.weight"] = llama3_rope_factors(spec["rope_base"], hd, spec["rope_scaling"])
    return out


def write_gguf(path: str, name: str, spec: dict, tensors: dict[str, np.ndarray]) -> None:
    arch = spec["arch"]
    wr = gguf.GGUFWriter(path, arch)
    wr.add_name(name)
    wr.add_context_length(spec["n_ctx"])
    wr.add_embedding_length(spec["n_embd"])
    wr.add_block_count(spec["n_layer"])
    wr.add_feed_forward_length(spec["n_ff"])
    wr.add_head_count(spec["n_head"])
    wr.add_head_count_kv(spec["n_head_kv"])
    wr.add_rope_dimension_count(spec["n_embd"] // spec["n_head"])
    wr.add_rope_freq_base(spec["rope_base"])
    wr.add_layer_norm_rms_eps(spec["rms_eps"])
    wr.add_vocab_size(256)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_1 if spec["quant"] else gguf.LlamaFileType.ALL_F32)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre(spec["pre"])
    wr.add_token_list(byte_alphabet())
    wr.add_token_types([gguf.TokenType.NORMAL] * 256)
    wr.add_token_merges(["\u0120 \u0120"])  # "ĠĠ" is not a token: never applies
    wr.add_bos_token_id(0)
    wr.add_eos_token_id(0)
    wr.add_add_bos_token(False)
    for tname, t in tensors.items():
        role = tname.split(".")[-2] if tname.startswith("blk.") else tname.split(".")[0]
        qt = QUANT_TYPES.get(role) if spec["quant"] and tname.endswith(".weight") and t.ndim == 2 else None
        if qt is None:
            wr.add_tensor(tname, np.ascontiguousarray(t, dtype=np.float32))
        else:
            wr.add_tensor(tname, gguf.quants.quantize(np.ascontiguousarray(t, dtype=np.float32), qt), raw_dtype=qt)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def read_gguf(path: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The stored numbers as float32 (dequantized), ggml shape reversed to numpy order, and their types."""
    reader = gguf.GGUFReader(path)
    out, types = {}, {}
    for t in reader.tensors:
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))
        out[t.name] = np.array(gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape), dtype=np.float32)
        types[t.name] = t.tensor_type.name
    return out, types


# ----------------------------------------------------------------------------------------------------
# reference: transformers


def build_hf(spec: dict, raw: dict[str, np.ndarray]):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    hd = spec["n_embd"] // spec["n_head"]
    rope = {"rope_type": "default", "rope_theta": spec["rope_base"]}
    if spec["rope_scaling"]:
        rope = dict(spec["rope_scaling"], rope_theta=spec["rope_base"])
    common = dict(vocab_size=256, hidden_size=spec["n_embd"], intermediate_size=spec["n_ff"],
                  num_hidden_layers=spec["n_layer"], num_attention_heads=spec["n_head"],
                  num_key_value_heads=spec["n_head_kv"], max_position_embeddings=spec["n_ctx"],
                  rms_norm_eps=spec["rms_eps"], rope_parameters=rope, tie_word_embeddings=spec["tied"],
                  hidden_act="silu", attention_dropout=0.0, bos_token_id=0, eos_token_id=0, pad_token_id=None)
    if spec["arch"] == "qwen2":
        config, cls = Qwen2Config(use_sliding_window=False, **common), Qwen2ForCausalLM
    else:
        config, cls = LlamaConfig(head_dim=hd, attention_bias=False, mlp_bias=False, **common), LlamaForCausalLM
    config._attn_implementation = "eager"
    model = cls(config).to(torch.float32)

    sd = {"model.embed_tokens.weight": raw["token_embd.weight"], "model.norm.weight": raw["output_norm.weight"]}
    for l in range(spec["n_layer"]):
        for hf, gg in GGUF_NAMES.items():
            t = raw.get(f"blk.{l}.{gg}")
            if t is None:
                continue
            if spec["arch"] == "llama" and hf == "self_attn.q_proj.weight":
                t = unpermute_qk(t, spec["n_head"])
            elif spec["arch"] == "llama" and hf == "self_attn.k_proj.weight":
                t = unpermute_qk(t, spec["n_head_kv"])
            sd[f"model.layers.{l}.{hf}"] = t
    if not spec["tied"]:
        sd["lm_head.weight"] = raw["output.weight"]
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()}, strict=False)
    missing = [m for m in missing if "rotary_emb" not in m and not (spec["tied"] and m == "lm_head.weight")]
    if missing or unexpected:
        raise RuntimeError(f"state dict mismatch: missing={missing} unexpected={unexpected}")
    if spec["tied"]:
        model.tie_weights()
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    model.eval()
    return model, config


@torch.no_grad()
def hf_logits(model, ids: list[int]) -> torch.Tensor:
    return model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False).logits[0].to(torch.float32)


# ----------------------------------------------------------------------------------------------------
# independent check: raw GGUF rows, llama.cpp conventions, float64


def own_logits(spec: dict, raw: dict[str, np.ndarray], ids: list[int], dtype=torch.float64, *, neox=None,
               use_bias=True, use_freq_factors=True) -> torch.Tensor:
    """ggml semantics: rope mode NORM (adjacent pairs) for llama, NEOX (i, i+d/2) for qwen2; theta =
    pos * base^(-2i/d) / rope_freqs[i]; bias added to Q/K/V before RoPE. The keyword arguments reproduce
    classic mistakes for the sensitivity figures."""
    if neox is None:
        neox = spec["arch"] == "qwen2"
    w = {k: torch.from_numpy(v).to(dtype) for k, v in raw.items()}
    out_w = w.get("output.weight", w["token_embd.weight"])
    T, H, Hkv = len(ids), spec["n_head"], spec["n_head_kv"]
    d = spec["n_embd"] // H
    eps = spec["rms_eps"]

    def rms(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    inv = spec["rope_base"] ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    if use_freq_factors and "rope_freqs.weight" in raw:
        inv = inv / torch.from_numpy(raw["rope_freqs.weight"]).double()
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang).to(dtype)[:, None, :], torch.sin(ang).to(dtype)[:, None, :]

    def rope(x):  # (T, heads, d)
        if neox:
            a, b = x[..., : d // 2], x[..., d // 2:]
            return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
        x2 = x.reshape(*x.shape[:-1], d // 2, 2)
        a, b = x2[..., 0], x2[..., 1]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).reshape(x.shape)

    x = w["token_embd.weight"][torch.tensor(ids)]
    mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
    kv_of = torch.arange(H) // (H // Hkv)
    for l in range(spec["n_layer"]):
        p = f"blk.{l}."

        def lin(h, name):
            y = h @ w[p + name + ".weight"].T
            if use_bias and (p + name + ".bias") in w:
                y = y + w[p + name + ".bias"]
            return y

        h = rms(x, w[p + "attn_norm.weight"])
        q = rope(lin(h, "attn_q").reshape(T, H, d))
        k = rope(lin(h, "attn_k").reshape(T, Hkv, d))
        v = lin(h, "attn_v").reshape(T, Hkv, d)
        s = torch.einsum("thd,shd->hts", q, k[:, kv_of]) / math.sqrt(d) + mask
        a = torch.einsum("hts,shd->thd", torch.softmax(s, dim=-1), v[:, kv_of]).reshape(T, H * d)
        x = x + a @ w[p + "attn_output.weight"].T
        h = rms(x, w[p + "ffn_norm.weight"])
        x = x + (torch.nn.functional.silu(h @ w[p + "ffn_gate.weight"].T) * (h @ w[p + "ffn_up.weight"].T)) \
            @ w[p + "ffn_down.weight"].T
    return rms(x, w["output_norm.weight"]) @ out_w.T


def llamacpp_check(path: str, prompts: list[dict], ref64: list[torch.Tensor]) -> dict:
    try:
        import llama_cpp
    except ImportError:
        return {"available": False}
    try:
        llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=256, logits_all=True, verbose=False,
                              n_threads=1, seed=0)
    except Exception as e:  # noqa: BLE001 - informative only
        return {"available": True, "error": repr(e)}
    res = {"available": True, "llama_cpp_python": pkg_version("llama_cpp_python"), "prompts": []}
    for p, r64 in zip(prompts, ref64):
        ids = list(llm.tokenize(p["text"].encode("utf-8"), add_bos=False, special=True))
        llm.reset()
        llm.eval(p["input_ids"])
        lg = torch.from_numpy(np.array(llm.scores[: len(p["input_ids"])], dtype=np.float64))
        diff = (lg - r64).abs()
        res["prompts"].append({
            "name": p["name"],
            "tokens_match": ids == p["input_ids"],
            "max_abs_logit_diff": float(diff.max()),
            "rms_logit_diff": float(diff.pow(2).mean().sqrt()),
            "argmax_agree": int((lg.argmax(1) == r64.argmax(1)).sum()),
            "positions": len(p["input_ids"]),
        })
    res["tokens_match_all"] = all(p["tokens_match"] for p in res["prompts"])
    res["max_abs_logit_diff"] = max(p["max_abs_logit_diff"] for p in res["prompts"])
    del llm
    return res


# ----------------------------------------------------------------------------------------------------


def greedy(step_logits, ids: list[int], n: int):
    seq, new, margins = list(ids), [], []
    for _ in range(n):
        lg = step_logits(seq)[-1].to(torch.float64)
        top2 = torch.topk(lg, 2).values
        t = int(lg.argmax())
        new.append(t)
        margins.append(float(top2[0] - top2[1]))
        seq.append(t)
    return new, margins


def make(name: str, spec: dict, command: str, no_llamacpp: bool) -> None:
    t0 = time.time()
    os.makedirs(MODELS_DIR, exist_ok=True)
    path = os.path.join(MODELS_DIR, name + ".gguf")
    w = hf_weights(spec)
    write_gguf(path, name, spec, to_gguf_tensors(spec, w))
    raw, types = read_gguf(path)
    # permute/unpermute round trip, and the F32 file stores the drawn numbers bit-exactly
    for l in range(spec["n_layer"]):
        for key, n in (("q_proj", spec["n_head"]), ("k_proj", spec["n_head_kv"])):
            hw = w[f"model.layers.{l}.self_attn.{key}.weight"]
            assert np.array_equal(unpermute_qk(permute_qk(hw, n), n), hw)
    if not spec["quant"]:
        gt = to_gguf_tensors(spec, w)
        assert all(np.array_equal(raw[k], gt[k]) for k in gt), "F32 GGUF does not hold the drawn weights"

    model, config = build_hf(spec, raw)
    alphabet = byte_alphabet()
    prompts = []
    for p in PROMPTS:
        ids = list(p["text"].encode("utf-8"))  # byte vocabulary, no merges, no BOS
        prompts.append({"name": p["name"], "text": p["text"], "input_ids": ids})

    # HF's own inverse frequencies vs the GGUF's base + rope_freqs (llama.cpp divides the frequency)
    hd = spec["n_embd"] // spec["n_head"]
    inv_gguf = spec["rope_base"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    if "rope_freqs.weight" in raw:
        inv_gguf = inv_gguf / torch.from_numpy(raw["rope_freqs.weight"]).double()
    inv_hf = model.model.rotary_emb.inv_freq.double()
    inv_freq_rel = float(((inv_hf - inv_gguf).abs() / inv_gguf).max())

    stats, per_prompt, ref64 = [], [], []
    for p in prompts:
        ids = p["input_ids"]
        l32 = hf_logits(model, ids)
        o64 = own_logits(spec, raw, ids)
        ref64.append(o64)
        g_ids, g_marg = greedy(lambda s: hf_logits(model, s), ids, N_GREEDY)
        g64_ids, _ = greedy(lambda s: own_logits(spec, raw, s), ids, N_GREEDY)
        full = ids + g_ids
        f64_full = own_logits(spec, raw, full)
        st = {
            "name": p["name"],
            "positions": len(ids),
            "hf32_vs_f64_max_abs_logit_diff": float((l32.double() - o64).abs().max()),
            "logit_abs_max": float(o64.abs().max()),
            "argmax_agree_hf32_f64": bool((l32.double().argmax(1) == o64.argmax(1)).all()),
            "greedy_agree_hf32_f64": g_ids == g64_ids,
            "greedy_min_margin": min(g_marg),
            # what a classic mistake would do (float64, over prompt + continuation, full vocabulary)
            "sensitivity_max_abs_logit_diff": {},
        }
        sens = st["sensitivity_max_abs_logit_diff"]

        def moved(r=raw, **bug):
            return float((own_logits(spec, r, full, **bug) - f64_full).abs().max())

        if spec["arch"] == "qwen2":
            sens["adjacent_pairs_instead_of_neox"] = moved(neox=False)
            sens["qkv_bias_ignored"] = moved(use_bias=False)
        else:
            sens["neox_pairs_instead_of_adjacent"] = moved(neox=True)
        if "rope_freqs.weight" in raw:
            sens["rope_freqs_ignored"] = moved(use_freq_factors=False)
            inverted = dict(raw, **{"rope_freqs.weight": (1.0 / raw["rope_freqs.weight"]).astype(np.float32)})
            sens["rope_freqs_multiplied_instead_of_divided"] = moved(inverted)
        stats.append(st)
        per_prompt.append((p, l32, g_ids, g_marg))

    prompts_out = []
    for p, l32, g_ids, g_marg in per_prompt:
        lg = l32.double()
        top2 = torch.topk(lg, 2, dim=-1).values
        prompts_out.append({
            "name": p["name"],
            "text": p["text"],
            "parse_special": True,
            "add_bos": False,
            "n_tokens": len(p["input_ids"]),
            "input_ids": p["input_ids"],
            "input_pieces": [alphabet[i] for i in p["input_ids"]],
            "logits_subset": [[fnum(v, DIGITS) for v in row] for row in lg.tolist()],
            "argmax": [int(v) for v in lg.argmax(-1).tolist()],
            "max_logit": [fnum(v, DIGITS) for v in lg.max(-1).values.tolist()],
            "logsumexp": [fnum(v, DIGITS) for v in torch.logsumexp(lg, -1).tolist()],
            "top2_gap": [fnum(v, 4) for v in (top2[:, 0] - top2[:, 1]).tolist()],
            "greedy": {
                "n_new": N_GREEDY,
                "method": "argmax of the float32 logits of the last position, full recompute each step, no EOS stop",
                "tokens": g_ids,
                "margins": [fnum(v, 4) for v in g_marg],
                "text": bytes(g_ids).decode("utf-8", errors="replace"),
                "full_text": bytes(p["input_ids"] + g_ids).decode("utf-8", errors="replace"),
            },
        })

    llcpp = {"available": False, "skipped": True} if no_llamacpp else llamacpp_check(path, prompts, ref64)

    cls = type(model).__name__
    fixture = {
        "format": FORMAT,
        "model": {
            "file": os.path.relpath(path, REPO),
            "sha256": sha256_file(path),
            "size_bytes": os.path.getsize(path),
            "architecture": spec["arch"],
            "name": name,
            "n_vocab": 256,
            "n_layer": spec["n_layer"],
            "n_embd": spec["n_embd"],
            "n_head": spec["n_head"],
            "n_head_kv": spec["n_head_kv"],
            "head_dim": hd,
            "n_ff": spec["n_ff"],
            "rope_freq_base": spec["rope_base"],
            "rope_scaling": spec["rope_scaling"],
            "rope_freqs": raw["rope_freqs.weight"].tolist() if "rope_freqs.weight" in raw else None,
            "rms_eps": spec["rms_eps"],
            "tied_output": spec["tied"],
            "qkv_bias": spec["arch"] == "qwen2",
            "tensor_types": sorted(set(types.values())),
            "tokenizer_model": "gpt2",
            "tokenizer_pre": spec["pre"],
            "bos_id": 0,
            "eos_id": 0,
            "add_bos": False,
            "gguf_add_bos_token": False,
            "seed": spec["seed"],
        },
        "generator": {
            "script": "tools/make_tiny_models.py",
            "command": command,
            "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": pkg_version("transformers"),
            "gguf": pkg_version("gguf"),
            "numpy": np.__version__,
            "reference": (f"HF transformers {cls}, float32, eager attention, rope_parameters "
                          f"{json.dumps(config.rope_parameters, sort_keys=True)}; weights = the GGUF's stored "
                          "numbers (gguf.GGUFReader + gguf.quants.dequantize"
                          + (", attn_q/attn_k rows un-permuted" if spec["arch"] == "llama" else ", no permutation")
                          + ")"),
            "tokenizer": "none: byte vocabulary, input_ids = UTF-8 bytes of text",
            "float_digits": DIGITS,
            "seconds": None,
        },
        "vocab_subset": list(range(256)),
        "checks": {
            "hf_inv_freq_vs_gguf_max_rel_diff": inv_freq_rel,
            "per_prompt": stats,
            "hf32_vs_f64_max_abs_logit_diff": max(s["hf32_vs_f64_max_abs_logit_diff"] for s in stats),
            "llamacpp": llcpp,
        },
        "prompts": prompts_out,
    }
    fixture["generator"]["seconds"] = round(time.time() - t0, 1)
    out = os.path.join(FIXTURES_DIR, name + ".json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")

    print(f"{name}: {path} ({os.path.getsize(path)} bytes), {out} ({os.path.getsize(out)} bytes)")
    print(f"  HF inv_freq vs GGUF base/rope_freqs: max rel diff {inv_freq_rel:.2g}")
    for st, po in zip(stats, prompts_out):
        print(f"  [{st['name']}] {st['positions']} tokens: hf32 vs f64 {st['hf32_vs_f64_max_abs_logit_diff']:.3g}, "
              f"|logit| max {st['logit_abs_max']:.3g}, argmax agree {st['argmax_agree_hf32_f64']}, greedy agree "
              f"{st['greedy_agree_hf32_f64']}, min margin {st['greedy_min_margin']:.3g}, min top2 gap "
              f"{min(po['top2_gap']):.3g}")
        print(f"    sensitivity: " + ", ".join(f"{k} {v:.3g}" for k, v in st["sensitivity_max_abs_logit_diff"].items()))
    if llcpp.get("prompts"):
        for lp in llcpp["prompts"]:
            print(f"  llama.cpp [{lp['name']}]: tokens match {lp['tokens_match']}, max|dlogit| vs f64 "
                  f"{lp['max_abs_logit_diff']:.3g}, argmax {lp['argmax_agree']}/{lp['positions']}")
    elif llcpp.get("error"):
        print(f"  llama.cpp: {llcpp['error']}")
    if os.path.getsize(path) >= 200 * 1024:
        print(f"WARNING: {path} is >= 200 KB", file=sys.stderr)
    if not all(s["greedy_agree_hf32_f64"] and s["argmax_agree_hf32_f64"] for s in stats):
        raise SystemExit(f"{name}: HF float32 and the float64 GGUF-layout forward disagree")
    if min(s["greedy_min_margin"] for s in stats) < MIN_MARGIN:
        raise SystemExit(f"{name}: a greedy step has a margin < {MIN_MARGIN}; pick another seed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=sorted(MODELS), action="append", help="model to write (repeatable)")
    ap.add_argument("--no-llamacpp", action="store_true", help="skip the optional llama-cpp-python cross-check")
    args = ap.parse_args()
    torch.manual_seed(0)
    warnings.filterwarnings("ignore")
    command = "python3 " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:])
    for name in args.only or MODELS:
        make(name, MODELS[name], command, args.no_llamacpp)


if __name__ == "__main__":
    main()
