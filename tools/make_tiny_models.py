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
                       does; untied output;
  * `tiny-qwen3`       arch qwen3: RMSNorm of each Q and K head before RoPE (attn_q_norm/attn_k_norm), NeoX
                       RoPE, GQA, head_dim 32 with 4 heads on n_embd 64 (attention.key_length/value_length, no
                       rope.dimension_count, as the converter writes it), tied output;
  * `tiny-gemma3`      arch gemma3, 7 layers: sliding window 8 on every layer but layer 5 ((i+1) % 6 == 0 is
                       global), RoPE base 10000 on the local layers and 1e6 on the global one, every norm stored
                       as HF weight + 1 (the converter's convention; the engine multiplies by it), pre/post
                       attention and FFN norms, Q/K head norms, embedding times sqrt(n_embd), GeGLU (tanh GELU),
                       head_dim 8 with 4 heads on n_embd 64, tied output;
  * `tiny-mistral`     transformers' Mistral as GGUF arch llama (Q/K rows permuted) with
                       llama.attention.sliding_window 8, applied to every layer (llama.cpp ignores that key,
                       so its cross-check is skipped);
  * `tiny-phi3`        arch phi3: fused attn_qkv (rows Q;K;V) and fused ffn_up (gate rows, then up rows),
                       NeoX RoPE on the first 12 of 16 head dimensions (rope.dimension_count 12), no window
                       (attention.sliding_window 0, as the converter writes it), untied output;
  * `tiny-qwen3-f16`, `tiny-gemma3-f16`, `tiny-mistral-f16`, `tiny-phi3-f16`
                       the same float weights as their F32 sibling with every matrix (embedding, output and
                       phi3's fused attn_qkv/ffn_up included) stored as F16, norms F32; the reference uses
                       the F16-rounded numbers.

The per-architecture pieces (shapes and seeds, weights, the HF <-> GGUF conversion, the transformers model and
the float64 forward pass) are in tools/tiny_archs.py. For each model the script (1) draws HF-layout float32
weights from a fixed numpy seed, (2) writes the GGUF with gguf.GGUFWriter in the conventions of llama.cpp's
convert_hf_to_gguf.py (quantizing or storing F16 where asked), (3) reads the GGUF back with
gguf.GGUFReader + gguf.quants.dequantize and loads exactly those numbers (converted back: llama Q/K
un-permuted, gemma3 norms minus 1) into transformers' model class, whose float32 logits go to the fixture,
and (4) cross-checks them with an independent float64 forward pass on the raw GGUF rows in llama.cpp's
conventions and, if llama-cpp-python is importable, with llama.cpp itself (informative only). It also
records how far classic mistakes would move the logits (sensitivity of the fixture).

Tokenizer: `gpt2` model, 256 tokens = the 256 bytes in GPT-2's byte-level spelling, token id = byte value,
no BOS. tokensieve and llama.cpp require tokenizer.ggml.merges, so it holds one merge ("Ġ Ġ") whose result
is not in the vocabulary and therefore never applies: any text tokenizes to its bytes.

The GGUF files (< 300 KB each) are committed under tests/fixtures/models/, the fixtures under
tests/fixtures/reference/ (format tokensieve-reference-v1, see docs/reference.md §3). Everything is
deterministic except the generator's date and timing fields.

Usage:  python3 tools/make_tiny_models.py [--only NAME] [--no-llamacpp] [--out DIR]
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
import tempfile
import time
import warnings

import numpy as np
import torch

import gguf
from gguf_vocab import byte_alphabet
from tiny_archs import (MODELS, Q, build_hf, fam, fixture_fields, from_gguf, gguf_name, head_dim, hf_inv_freqs,
                        hf_weights, own_logits, rope_dim, sensitivity_bugs, to_gguf_tensors)

FORMAT = "tokensieve-reference-v1"
N_GREEDY = 32
DIGITS = 6
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.path.join(REPO, "tests", "fixtures", "models")
FIXTURES_DIR = os.path.join(REPO, "tests", "fixtures", "reference")
MAX_GGUF_BYTES = 300 * 1024

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

# The seeds were picked (by trying a few) so that every greedy step's top-1 - top-2 margin is >= MIN_MARGIN:
# tests/unit/test_reference.cpp requires identical greedy tokens with a logit tolerance of 0.05.
MIN_MARGIN = 0.1
# transformers float32 vs the float64 forward pass: float32 noise is ~1e-5; a convention mistake is >= 0.1.
HF_F64_TOL = 1e-3

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


# ----------------------------------------------------------------------------------------------------
# weights and GGUF


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
    if fam(spec)["rope_dim_key"]:
        wr.add_rope_dimension_count(rope_dim(spec))
    wr.add_rope_freq_base(spec["rope_base"])  # gemma3: the global layers' base (the local one is llama.cpp's 10000)
    wr.add_layer_norm_rms_eps(spec["rms_eps"])
    if spec.get("head_dim"):
        wr.add_key_length(spec["head_dim"])
        wr.add_value_length(spec["head_dim"])
    if spec.get("window") is not None:
        wr.add_sliding_window(spec["window"])
    if fam(spec)["orig_ctx_key"]:
        wr.add_rope_scaling_orig_ctx_len(spec["n_ctx"])
    wr.add_vocab_size(256)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_1 if spec["quant"] else
                     gguf.LlamaFileType.MOSTLY_F16 if spec.get("f16") else gguf.LlamaFileType.ALL_F32)
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
        if qt is None and spec.get("f16") and t.ndim == 2:  # matrices F16, norms F32 (the converter's --outtype f16)
            wr.add_tensor(tname, np.ascontiguousarray(t, dtype=np.float16))
        elif qt is None:
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


@torch.no_grad()
def hf_logits(model, ids: list[int]) -> torch.Tensor:
    return model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False).logits[0].to(torch.float32)


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


def make(name: str, spec: dict, command: str, no_llamacpp: bool, out_dir: str | None = None) -> None:
    t0 = time.time()
    models_dir, fixtures_dir = out_dir or MODELS_DIR, out_dir or FIXTURES_DIR
    os.makedirs(models_dir, exist_ok=True)
    os.makedirs(fixtures_dir, exist_ok=True)
    path = os.path.join(models_dir, name + ".gguf")
    w = hf_weights(spec)
    gt = to_gguf_tensors(spec, w)
    write_gguf(path, name, spec, gt)
    raw, types = read_gguf(path)
    # the conversion's inverse gives back the drawn HF weights (llama's Q/K permutation round trip), up to the
    # float32 rounding of gemma3's norm + 1; an F32/F16 file stores the converted numbers exactly (F16-rounded)
    for hf_name, t in w.items():
        g = gt[gguf_name(spec, hf_name)]
        tol = np.abs(np.spacing(g)) if fam(spec)["norm_shift"] else 0
        assert np.all(np.abs(from_gguf(spec, hf_name, g) - t) <= tol), hf_name
    if not spec["quant"]:
        stored = {k: (t.astype(np.float16).astype(np.float32) if spec.get("f16") and t.ndim == 2 else t)
                  for k, t in gt.items()}
        assert all(np.array_equal(raw[k], stored[k]) for k in gt), "the GGUF does not hold the drawn weights"

    model, config = build_hf(spec, raw)
    alphabet = byte_alphabet()
    prompts = []
    for p in PROMPTS:
        ids = list(p["text"].encode("utf-8"))  # byte vocabulary, no merges, no BOS
        prompts.append({"name": p["name"], "text": p["text"], "input_ids": ids})

    # HF's own inverse frequencies vs the GGUF's base + rope_freqs (llama.cpp divides the frequency), over the
    # rotated dimensions r; gemma3: the global and the local base
    hd, r = head_dim(spec), rope_dim(spec)
    inv_freq_rel = 0.0
    for inv_hf, base in hf_inv_freqs(spec, model):
        inv_gguf = base ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
        if "rope_freqs.weight" in raw:
            inv_gguf = inv_gguf / torch.from_numpy(raw["rope_freqs.weight"]).double()
        inv_freq_rel = max(inv_freq_rel, float(((inv_hf.double() - inv_gguf).abs() / inv_gguf).max()))

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

        def moved(r=raw, bug=None):
            return float((own_logits(spec, r, full, bug=bug) - f64_full).abs().max())

        for bug in sensitivity_bugs(spec):
            sens[bug] = moved(bug=bug)
        if "rope_freqs.weight" in raw:
            sens["rope_freqs_ignored"] = moved(bug="rope_freqs_ignored")
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

    if fam(spec)["llamacpp_skip"]:
        llcpp = {"available": False, "skipped": True, "reason": fam(spec)["llamacpp_skip"]}
    elif no_llamacpp:
        llcpp = {"available": False, "skipped": True}
    elif fam(spec)["llamacpp_name"]:  # the same tensors and keys but for general.name
        alias = fam(spec)["llamacpp_name"]
        with tempfile.TemporaryDirectory() as tmp:
            write_gguf(os.path.join(tmp, "m.gguf"), alias, spec, gt)
            llcpp = dict(llamacpp_check(os.path.join(tmp, "m.gguf"), prompts, ref64), general_name=alias)
    else:
        llcpp = llamacpp_check(path, prompts, ref64)

    cls = type(model).__name__
    fixture = {
        "format": FORMAT,
        "model": {
            "file": os.path.relpath(os.path.join(MODELS_DIR, name + ".gguf"), REPO),
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
            "qkv_bias": fam(spec)["qkv_bias"],
            "tensor_types": sorted(set(types.values())),
            "tokenizer_model": "gpt2",
            "tokenizer_pre": spec["pre"],
            "bos_id": 0,
            "eos_id": 0,
            "add_bos": False,
            "gguf_add_bos_token": False,
            "seed": spec["seed"],
            **fixture_fields(spec),
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
                          + (", attn_q/attn_k rows un-permuted" if fam(spec)["permute_qk"] else ", no permutation")
                          + (", every norm weight minus 1 (HF's RMSNorm multiplies by 1 + w)"
                             if fam(spec)["norm_shift"] else "")
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
    out = os.path.join(fixtures_dir, name + ".json")
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
    if llcpp.get("reason"):
        print(f"  llama.cpp: skipped ({llcpp['reason']})")
    if os.path.getsize(path) >= MAX_GGUF_BYTES:
        print(f"WARNING: {path} is >= {MAX_GGUF_BYTES // 1024} KB", file=sys.stderr)
    if not all(s["greedy_agree_hf32_f64"] and s["argmax_agree_hf32_f64"] for s in stats):
        raise SystemExit(f"{name}: HF float32 and the float64 GGUF-layout forward disagree")
    if fixture["checks"]["hf32_vs_f64_max_abs_logit_diff"] > HF_F64_TOL:
        raise SystemExit(f"{name}: HF float32 and the float64 GGUF-layout forward differ by more than {HF_F64_TOL}")
    if min(s["greedy_min_margin"] for s in stats) < MIN_MARGIN:
        raise SystemExit(f"{name}: a greedy step has a margin < {MIN_MARGIN}; pick another seed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=sorted(MODELS), action="append", help="model to write (repeatable)")
    ap.add_argument("--no-llamacpp", action="store_true", help="skip the optional llama-cpp-python cross-check")
    ap.add_argument("--out", metavar="DIR", help="write NAME.gguf and NAME.json into DIR instead of tests/fixtures/"
                    "{models,reference}/ (the fixture still names tests/fixtures/models/NAME.gguf)")
    args = ap.parse_args()
    torch.manual_seed(0)
    warnings.filterwarnings("ignore")
    command = "python3 " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:])
    for name in args.only or MODELS:
        make(name, MODELS[name], command, args.no_llamacpp, args.out)


if __name__ == "__main__":
    main()
