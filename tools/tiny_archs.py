"""Per-architecture pieces of tools/make_tiny_models.py.

One table (FAMILIES) says what sets each transformers model family apart; everything else here follows its
flags, so there is one weight generator, one HF -> GGUF conversion, one transformers loader and one float64
forward pass for all of them:

  * hf_weights        HF-layout float32 weights from the model's numpy seed;
  * to_gguf_tensors   HF names/layout -> GGUF names/layout as llama.cpp's convert_hf_to_gguf.py writes them
                      (names from gguf's own TensorNameMap; llama Q/K rows permuted; gemma3 norms + 1);
  * build_hf          the transformers model, loaded with the numbers read back from the GGUF (inverse of
                      the conversion);
  * own_logits        an independent float64 forward pass on the raw GGUF rows in ggml's conventions, with
                      switches that reproduce classic mistakes (the fixtures' sensitivity figures).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

import gguf

Q = gguf.GGMLQuantizationType

# What sets a family apart (key: spec["family"], the transformers model):
#   neox           RoPE pairs (x[i], x[i+r/2]) (ggml NEOX) instead of adjacent pairs (ggml NORM);
#   permute_qk     GGUF attn_q/attn_k rows permuted HF -> GGUF (LlamaModel.permute in the converter);
#   qkv_bias       biases on Q, K, V;
#   qk_norm        RMSNorm of every Q and K head (attn_q_norm/attn_k_norm, length head_dim) before RoPE;
#   norm_shift     the converter adds this to every *norm.weight (gemma3: HF computes x*(1+w), GGUF holds w+1);
#   post_norms     gemma3's RMSNorm of the attention and FFN outputs before the residual add;
#   embed_scale    token embeddings times sqrt(n_embd) (float32, as HF's buffer and llama.cpp's sqrtf);
#   act            FFN activation: "silu" (SwiGLU) or "gelu_tanh" (GeGLU, GELU's tanh approximation);
#   fused_qkv      one attn_qkv matrix, rows Q;K;V (phi3's qkv_proj as is);
#   fused_gate_up  ffn_up holds the gate rows, then the up rows (phi3's gate_up_proj as is), no ffn_gate;
#   global_every   with a sliding window: layer i is global iff (i+1) % global_every == 0 (0: every layer local);
#   rope_dim_key   write rope.dimension_count (the converter does for llama and phi3; qwen3/gemma3 files have none,
#                  so n_rot defaults to attention.key_length);
#   orig_ctx_key   write rope.scaling.original_context_length (phi3's converter does);
#   new_fields     the fixture's extra `model` fields of the architectures added after qwen2/llama
#                  (tiny-qwen2/tiny-llama3 fixtures keep their original fields);
#   llamacpp_skip  why the llama.cpp cross-check would be meaningless, or None;
#   llamacpp_name  general.name of the copy llama.cpp is given instead, or None (llama.cpp 0.3.36 does not load
#                  a phi3 file whose general.name contains "phi3" or "phi-3": "error loading model vocabulary:
#                  unordered_map::at", presumably a special token it expects in Phi-3 vocabularies).
_BASE = dict(neox=False, permute_qk=False, qkv_bias=False, qk_norm=False, norm_shift=0.0, post_norms=False,
             embed_scale=False, act="silu", fused_qkv=False, fused_gate_up=False, global_every=0, rope_dim_key=True,
             orig_ctx_key=False, new_fields=True, llamacpp_skip=None, llamacpp_name=None)
FAMILIES = {
    "qwen2": dict(_BASE, hf_class="Qwen2ForCausalLM", neox=True, qkv_bias=True, new_fields=False),
    "llama": dict(_BASE, hf_class="LlamaForCausalLM", permute_qk=True, new_fields=False),
    "qwen3": dict(_BASE, hf_class="Qwen3ForCausalLM", neox=True, qk_norm=True, rope_dim_key=False),
    "gemma3": dict(_BASE, hf_class="Gemma3ForCausalLM", neox=True, qk_norm=True, norm_shift=1.0, post_norms=True,
                   embed_scale=True, act="gelu_tanh", global_every=6, rope_dim_key=False),
    "mistral": dict(_BASE, hf_class="MistralForCausalLM", permute_qk=True,
                    llamacpp_skip="llama.cpp ignores llama.attention.sliding_window for arch llama"),
    "phi3": dict(_BASE, hf_class="Phi3ForCausalLM", neox=True, fused_qkv=True, fused_gate_up=True, orig_ctx_key=True,
                 llamacpp_name="tiny"),
}

# Spec keys: family, arch (GGUF), shapes, head_dim (explicit: written as attention.key_length/value_length),
# rope_dim (partial rotary), window (None: no key; 0: key 0 = no window, as phi3's converter writes it),
# rope_base_local (RoPE base of the sliding-window layers), embed_std / out_norm_gain / resid_gain (weight
# scales: embedding, final norm, o_proj and down_proj), quant (Q8_0/Q4_0/Q4_1 matrices) or f16 (F16 matrices,
# norms F32), seed. With a tied output, a residual stream dominated by the token's own embedding makes every
# argmax the input token; the scales keep the layers' contribution larger than that.
QWEN2 = dict(family="qwen2", arch="qwen2", n_layer=2, n_embd=32, n_head=4, n_head_kv=2, n_ff=64, n_ctx=512,
             rope_base=10000.0, rms_eps=1e-6, tied=True, pre="qwen2", rope_scaling=None, seed=20261122)
# Llama 3.1 scaling: factor/low/high as Meta's, original context 32 so that at base 500 and head_dim 16
# the 8 frequencies fall in all three bands: pair 0 unchanged (wavelength 6.3 < 32/4), pairs 1-2 smoothed
# (13.6, 29.5), pairs 3-7 divided by 8 (64 .. 1400 > 32); prompts + continuations reach position 80.
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 32}
# gemma3: 7 layers so that layer 5 (the global one) has local layers before and after it; window 8 < every
# prompt. Scaled embedding: drawn with std 1/sqrt(n_embd) so that it enters the layers at RMS ~1 as the other
# models' embeddings do (the post-norms add ~1 per sublayer), and a final-norm gain of ~5 to give logits of a
# few units through the tied output. The F32 file must stay < 300 KB, hence n_ff 8.
GEMMA3 = dict(family="gemma3", arch="gemma3", n_layer=7, n_embd=64, n_head=4, n_head_kv=2, head_dim=8, n_ff=8,
              n_ctx=512, rope_base=1000000.0, rope_base_local=10000.0, window=8, rms_eps=1e-6, tied=True,
              pre="default", rope_scaling=None, embed_std=0.125, out_norm_gain=5.0, quant=False, seed=20261209)
# query width n_head*head_dim = 128 != n_embd 64
QWEN3 = dict(family="qwen3", arch="qwen3", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, head_dim=32, n_ff=16,
             n_ctx=512, rope_base=1000000.0, rms_eps=1e-6, tied=True, pre="qwen2", rope_scaling=None, resid_gain=4.0,
             quant=False, seed=20261203)
MISTRAL = dict(family="mistral", arch="llama", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=32,
               n_ctx=512, rope_base=1000000.0, window=8, rms_eps=1e-5, tied=False, pre="llama-bpe", rope_scaling=None,
               quant=False, seed=20261281)
# partial rotary: 12 of the 16 head dimensions rotate (partial_rotary_factor 0.75)
PHI3 = dict(family="phi3", arch="phi3", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, rope_dim=12, n_ff=32, n_ctx=512,
            rope_base=10000.0, window=0, rms_eps=1e-5, tied=False, pre="llama-bpe", rope_scaling=None, quant=False,
            seed=20261246)
# The -f16 variants: the same drawn weights (same seed) with every matrix F16 (phi3: the fused attn_qkv and
# ffn_up too), norms F32.
MODELS = {
    "tiny-qwen2": dict(QWEN2, quant=False),
    "tiny-qwen2-quant": dict(QWEN2, quant=True),
    "tiny-llama3": dict(family="llama", arch="llama", n_layer=2, n_embd=32, n_head=2, n_head_kv=1, n_ff=64, n_ctx=512,
                        rope_base=500.0, rms_eps=1e-5, tied=False, pre="llama-bpe", rope_scaling=LLAMA3_SCALING,
                        quant=False, seed=20261124),
    "tiny-qwen3": QWEN3,
    "tiny-qwen3-f16": dict(QWEN3, f16=True),
    "tiny-gemma3": GEMMA3,
    "tiny-gemma3-f16": dict(GEMMA3, f16=True),
    "tiny-mistral": MISTRAL,
    "tiny-mistral-f16": dict(MISTRAL, f16=True),
    "tiny-phi3": PHI3,
    "tiny-phi3-f16": dict(PHI3, f16=True),
}


def fam(spec: dict) -> dict:
    return FAMILIES[spec["family"]]


def head_dim(spec: dict) -> int:
    return spec.get("head_dim") or spec["n_embd"] // spec["n_head"]


def rope_dim(spec: dict) -> int:
    return spec.get("rope_dim") or head_dim(spec)


def windowed(spec: dict, layer: int) -> bool:
    """Whether the layer attends through the sliding window (gemma3: all but every 6th, as llama.cpp)."""
    every = fam(spec)["global_every"]
    return bool(spec.get("window")) and (every == 0 or (layer + 1) % every != 0)


def layer_rope_base(spec: dict, layer: int) -> float:
    if windowed(spec, layer) and spec.get("rope_base_local"):
        return spec["rope_base_local"]
    return spec["rope_base"]


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
# weights and the HF <-> GGUF conversion


def hf_weights(spec: dict) -> dict[str, np.ndarray]:
    """Random HF-layout weights (nn.Linear: [out, in]). Scales give attention scores and logits of a few
    units, so RoPE, bias and norm mistakes show and greedy steps are not near-ties. The draw order of the
    qwen2/llama models is the original one (their files stay byte-identical)."""
    f_ = fam(spec)
    rng = np.random.default_rng(spec["seed"])
    d, f, hd = spec["n_embd"], spec["n_ff"], head_dim(spec)
    qd, kv = spec["n_head"] * hd, spec["n_head_kv"] * hd

    def mat(rows, cols, gain):
        return (rng.standard_normal((rows, cols)) * gain / math.sqrt(cols)).astype(np.float32)

    def norm(n=d, gain=1.0):  # effective multiplier gain * (1 + 0.2 N); gemma3's HF weight is that minus 1
        g = 1.0 + 0.2 * rng.standard_normal(n)
        if gain != 1.0:
            g = gain * g
        return (g - f_["norm_shift"]).astype(np.float32)

    w = {"model.embed_tokens.weight": (rng.standard_normal((256, d)) * spec.get("embed_std", 1.0)).astype(np.float32)}
    for l in range(spec["n_layer"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = norm()
        q, k, v = mat(qd, d, 1.5), mat(kv, d, 1.5), mat(kv, d, 1.0)
        if f_["fused_qkv"]:
            w[p + "self_attn.qkv_proj.weight"] = np.concatenate([q, k, v])
        else:
            for key, t in (("q_proj", q), ("k_proj", k), ("v_proj", v)):
                w[p + f"self_attn.{key}.weight"] = t
        if f_["qkv_bias"]:
            w[p + "self_attn.q_proj.bias"] = (0.5 * rng.standard_normal(qd)).astype(np.float32)
            w[p + "self_attn.k_proj.bias"] = (0.5 * rng.standard_normal(kv)).astype(np.float32)
            w[p + "self_attn.v_proj.bias"] = (0.5 * rng.standard_normal(kv)).astype(np.float32)
        if f_["qk_norm"]:
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "self_attn.o_proj.weight"] = mat(d, qd, spec.get("resid_gain", 1.0))
        w[p + "post_attention_layernorm.weight"] = norm()  # gemma3: after attention; the others: before the FFN
        if f_["post_norms"]:
            w[p + "pre_feedforward_layernorm.weight"] = norm()
        gate, up = mat(f, d, 1.0), mat(f, d, 1.0)
        if f_["fused_gate_up"]:
            w[p + "mlp.gate_up_proj.weight"] = np.concatenate([gate, up])
        else:
            w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"] = gate, up
        w[p + "mlp.down_proj.weight"] = mat(d, f, spec.get("resid_gain", 1.0))
        if f_["post_norms"]:
            w[p + "post_feedforward_layernorm.weight"] = norm()
    w["model.norm.weight"] = norm(gain=spec.get("out_norm_gain", 1.0))
    if not spec["tied"]:
        w["lm_head.weight"] = mat(256, d, 6.0)
    return w


@functools.lru_cache(maxsize=None)
def _tensor_map(arch: str, n_layer: int):
    enum = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}[arch]
    return gguf.get_tensor_name_map(enum, n_layer)


def gguf_name(spec: dict, hf_name: str) -> str:
    """The converter's name for an HF tensor (gguf's TensorNameMap for the GGUF architecture)."""
    name = _tensor_map(spec["arch"], spec["n_layer"]).get_name(hf_name, try_suffixes=(".weight", ".bias"))
    if name is None:
        raise ValueError(f"no GGUF name for {hf_name} in arch {spec['arch']}")
    return name


def _qk_heads(spec: dict, hf_name: str) -> int | None:
    """Head count of a Q/K weight the converter permutes (llama), else None."""
    if fam(spec)["permute_qk"] and hf_name.endswith(".weight"):
        if hf_name.endswith("self_attn.q_proj.weight"):
            return spec["n_head"]
        if hf_name.endswith("self_attn.k_proj.weight"):
            return spec["n_head_kv"]
    return None


def _shifted(spec: dict, hf_name: str) -> bool:
    return fam(spec)["norm_shift"] != 0.0 and hf_name.endswith("norm.weight")


def to_gguf_tensors(spec: dict, w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """HF names/layout -> GGUF names/layout, as convert_hf_to_gguf.py: llama Q/K rows permuted, gemma3 norms
    + 1 (in float32, like the converter on float32 weights), the rest (qwen2/qwen3/gemma3 Q/K, phi3's fused
    qkv_proj and gate_up_proj) as is; then llama3's rope_freqs."""
    out = {}
    for hf, t in w.items():
        n = _qk_heads(spec, hf)
        if n is not None:
            t = permute_qk(t, n)
        if _shifted(spec, hf):
            t = (t + np.float32(fam(spec)["norm_shift"])).astype(np.float32)
        out[gguf_name(spec, hf)] = t
    if spec["rope_scaling"]:
        out["rope_freqs.weight"] = llama3_rope_factors(spec["rope_base"], head_dim(spec), spec["rope_scaling"])
    return out


def from_gguf(spec: dict, hf_name: str, t: np.ndarray) -> np.ndarray:
    """Inverse of to_gguf_tensors for one tensor (what transformers must hold)."""
    n = _qk_heads(spec, hf_name)
    if n is not None:
        t = unpermute_qk(t, n)
    if _shifted(spec, hf_name):
        shifted = (t - np.float32(fam(spec)["norm_shift"])).astype(np.float32)
        # HF multiplies by 1 + w in float32: exactly the GGUF's number, so both sides use identical gains
        assert np.array_equal((shifted + np.float32(1.0)).astype(np.float32), t), hf_name
        t = shifted
    return t


# ----------------------------------------------------------------------------------------------------
# reference: transformers


def hf_config(spec: dict):
    import transformers

    f_ = fam(spec)
    hd, base = head_dim(spec), spec["rope_base"]
    rope = {"rope_type": "default", "rope_theta": base}
    if spec["rope_scaling"]:
        rope = dict(spec["rope_scaling"], rope_theta=base)
    if rope_dim(spec) != hd:
        rope["partial_rotary_factor"] = rope_dim(spec) / hd
    kw = dict(vocab_size=256, hidden_size=spec["n_embd"], intermediate_size=spec["n_ff"],
              num_hidden_layers=spec["n_layer"], num_attention_heads=spec["n_head"],
              num_key_value_heads=spec["n_head_kv"], max_position_embeddings=spec["n_ctx"],
              rms_norm_eps=spec["rms_eps"], rope_parameters=rope, tie_word_embeddings=spec["tied"],
              hidden_act="silu", attention_dropout=0.0, bos_token_id=0, eos_token_id=0, pad_token_id=None)
    family = spec["family"]
    if family == "qwen2":
        return transformers.Qwen2Config(use_sliding_window=False, **kw)
    if family == "llama":
        return transformers.LlamaConfig(head_dim=hd, attention_bias=False, mlp_bias=False, **kw)
    if family == "qwen3":
        return transformers.Qwen3Config(head_dim=hd, attention_bias=False, use_sliding_window=False, **kw)
    if family == "mistral":
        return transformers.MistralConfig(head_dim=hd, sliding_window=spec["window"], **kw)
    if family == "phi3":  # no LongRoPE (rope_type default), no window (sliding_window None)
        return transformers.Phi3Config(original_max_position_embeddings=spec["n_ctx"], sliding_window=None,
                                       resid_pdrop=0.0, embd_pdrop=0.0, **kw)
    if family == "gemma3":  # transformers 5.x: per-layer-type rope_parameters and explicit layer_types
        del kw["hidden_act"]
        kw["rope_parameters"] = {
            "full_attention": {"rope_type": "default", "rope_theta": base},
            "sliding_attention": {"rope_type": "default", "rope_theta": spec["rope_base_local"]},
        }
        layer_types = ["sliding_attention" if windowed(spec, l) else "full_attention" for l in range(spec["n_layer"])]
        # the same pattern as transformers' own default (sliding_window_pattern 6)
        assert layer_types == transformers.Gemma3TextConfig(num_hidden_layers=spec["n_layer"]).layer_types
        return transformers.Gemma3TextConfig(
            head_dim=hd, hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=hd,
            sliding_window=spec["window"], layer_types=layer_types, final_logit_softcapping=None,
            attn_logit_softcapping=None, attention_bias=False, **kw)
    raise ValueError(family)


def build_hf(spec: dict, raw: dict[str, np.ndarray]):
    """transformers' model with every parameter taken from the GGUF's stored numbers (un-converted)."""
    import transformers

    config = hf_config(spec)
    config._attn_implementation = "eager"
    model = getattr(transformers, fam(spec)["hf_class"])(config).to(torch.float32)
    sd, used = {}, set()
    for key in model.state_dict():
        if spec["tied"] and key == "lm_head.weight":
            continue
        gname = gguf_name(spec, key)
        sd[key] = torch.from_numpy(from_gguf(spec, key, raw[gname]).copy())
        used.add(gname)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if list(missing) != (["lm_head.weight"] if spec["tied"] else []) or unexpected:
        raise RuntimeError(f"state dict mismatch: missing={missing} unexpected={unexpected}")
    unused = set(raw) - used - {"rope_freqs.weight"}
    if unused:
        raise RuntimeError(f"GGUF tensors the HF model does not use: {sorted(unused)}")
    if spec["tied"]:
        model.tie_weights()
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    model.eval()
    return model, config


def hf_inv_freqs(spec: dict, model) -> list[tuple[torch.Tensor, float]]:
    """transformers' inverse RoPE frequencies, each with the GGUF base it must equal."""
    rot = model.model.rotary_emb
    if spec["family"] == "gemma3":
        return [(rot.full_attention_inv_freq, spec["rope_base"]),
                (rot.sliding_attention_inv_freq, spec["rope_base_local"])]
    return [(rot.inv_freq, spec["rope_base"])]


# ----------------------------------------------------------------------------------------------------
# independent check: raw GGUF rows, llama.cpp conventions, float64


def sensitivity_bugs(spec: dict) -> list[str]:
    """The classic mistakes own_logits can make for this model (besides the rope_freqs ones)."""
    f_ = fam(spec)
    bugs = ["adjacent_pairs_instead_of_neox" if f_["neox"] else "neox_pairs_instead_of_adjacent"]
    if f_["qkv_bias"]:
        bugs.append("qkv_bias_ignored")
    if f_["qk_norm"]:
        bugs.append("qk_norm_ignored")
    if spec.get("window"):
        bugs.append("sliding_window_ignored")
    if spec.get("rope_base_local"):
        bugs.append("global_rope_base_on_local_layers")
    if f_["norm_shift"]:
        bugs.append("norm_plus_one_applied_again")
    if f_["embed_scale"]:
        bugs.append("embedding_not_scaled")
    if f_["act"] == "gelu_tanh":
        bugs.append("gelu_erf_instead_of_tanh")
    if f_["fused_gate_up"]:
        bugs.append("gate_up_halves_swapped")
    if rope_dim(spec) != head_dim(spec):
        bugs.append("rotary_on_whole_head")
    return bugs


def own_logits(spec: dict, raw: dict[str, np.ndarray], ids: list[int], dtype=torch.float64, *,
               bug: str | None = None) -> torch.Tensor:
    """ggml semantics: rope mode NORM (adjacent pairs) for llama, NEOX (i, i+r/2) for the others, over the
    first r = rope.dimension_count dimensions of each head; theta = pos * base^(-2i/r) / rope_freqs[i] with
    the layer's base; bias added to Q/K/V before RoPE; Q/K head norms before RoPE; scores / sqrt(head_dim);
    a sliding-window layer sees positions p - window < j <= p. `bug` reproduces one classic mistake."""
    f_ = fam(spec)
    neox = f_["neox"] != (bug in ("adjacent_pairs_instead_of_neox", "neox_pairs_instead_of_adjacent"))
    w = {k: torch.from_numpy(v).to(dtype) for k, v in raw.items()}
    out_w = w.get("output.weight", w["token_embd.weight"])
    T, H, Hkv = len(ids), spec["n_head"], spec["n_head_kv"]
    d = head_dim(spec)
    r = d if bug == "rotary_on_whole_head" else rope_dim(spec)
    eps = spec["rms_eps"]
    n_ff = spec["n_ff"]

    def rms(x, g):
        if bug == "norm_plus_one_applied_again":
            g = 1 + g
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    @functools.lru_cache(maxsize=None)
    def cos_sin(base):
        inv = base ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
        if bug != "rope_freqs_ignored" and "rope_freqs.weight" in raw:
            inv = inv / torch.from_numpy(raw["rope_freqs.weight"]).double()
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        return torch.cos(ang).to(dtype)[:, None, :], torch.sin(ang).to(dtype)[:, None, :]

    def rope(x, base):  # (T, heads, d)
        cos, sin = cos_sin(base)
        if neox:
            a, b = x[..., : r // 2], x[..., r // 2: r]
            parts = (a * cos - b * sin, a * sin + b * cos)
            return torch.cat(parts + ((x[..., r:],) if r < d else ()), dim=-1)
        xr = x[..., :r]
        x2 = xr.reshape(*xr.shape[:-1], r // 2, 2)
        a, b = x2[..., 0], x2[..., 1]
        y = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).reshape(xr.shape)
        return torch.cat((y, x[..., r:]), dim=-1) if r < d else y

    def act(g):
        if f_["act"] == "silu":
            return torch.nn.functional.silu(g)
        if bug == "gelu_erf_instead_of_tanh":
            return 0.5 * g * (1 + torch.erf(g / math.sqrt(2)))
        return 0.5 * g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))

    x = w["token_embd.weight"][torch.tensor(ids)]
    if f_["embed_scale"] and bug != "embedding_not_scaled":
        x = x * float(np.float32(math.sqrt(spec["n_embd"])))  # float32 factor, as HF's buffer and ggml's sqrtf
    mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
    if spec.get("window") and bug != "sliding_window_ignored":
        swa_mask = mask.masked_fill(torch.ones(T, T, dtype=torch.bool).tril(-spec["window"]), float("-inf"))
    kv_of = torch.arange(H) // (H // Hkv)
    for l in range(spec["n_layer"]):
        p = f"blk.{l}."
        swa = windowed(spec, l) and bug != "sliding_window_ignored"
        base = spec["rope_base"] if bug == "global_rope_base_on_local_layers" else layer_rope_base(spec, l)

        def lin(h, name):
            y = h @ w[p + name + ".weight"].T
            if bug != "qkv_bias_ignored" and (p + name + ".bias") in w:
                y = y + w[p + name + ".bias"]
            return y

        h = rms(x, w[p + "attn_norm.weight"])
        if f_["fused_qkv"]:
            q, k, v = lin(h, "attn_qkv").split([H * d, Hkv * d, Hkv * d], dim=-1)
        else:
            q, k, v = lin(h, "attn_q"), lin(h, "attn_k"), lin(h, "attn_v")
        q, k, v = q.reshape(T, H, d), k.reshape(T, Hkv, d), v.reshape(T, Hkv, d)
        if f_["qk_norm"] and bug != "qk_norm_ignored":
            q, k = rms(q, w[p + "attn_q_norm.weight"]), rms(k, w[p + "attn_k_norm.weight"])
        q, k = rope(q, base), rope(k, base)
        s = torch.einsum("thd,shd->hts", q, k[:, kv_of]) / math.sqrt(d) + (swa_mask if swa else mask)
        a = torch.einsum("hts,shd->thd", torch.softmax(s, dim=-1), v[:, kv_of]).reshape(T, H * d)
        o = a @ w[p + "attn_output.weight"].T
        if f_["post_norms"]:
            o = rms(o, w[p + "post_attention_norm.weight"])
        x = x + o
        h = rms(x, w[p + "ffn_norm.weight"])
        if f_["fused_gate_up"]:
            gu = h @ w[p + "ffn_up.weight"].T
            gate, up = gu[:, :n_ff], gu[:, n_ff:]
            if bug == "gate_up_halves_swapped":
                gate, up = up, gate
        else:
            gate, up = h @ w[p + "ffn_gate.weight"].T, h @ w[p + "ffn_up.weight"].T
        y = (act(gate) * up) @ w[p + "ffn_down.weight"].T
        if f_["post_norms"]:
            y = rms(y, w[p + "post_ffw_norm.weight"])
        x = x + y
    return rms(x, w["output_norm.weight"]) @ out_w.T


def fixture_fields(spec: dict) -> dict:
    """Extra `model` fields of the fixtures of the architectures added after qwen2/llama."""
    f_ = fam(spec)
    if not f_["new_fields"]:
        return {}
    return {
        "rope_dim": rope_dim(spec),
        "sliding_window": spec.get("window"),
        "swa_layers": [l for l in range(spec["n_layer"]) if windowed(spec, l)],
        "rope_freq_base_swa": spec.get("rope_base_local") if spec.get("window") else None,
        "qk_norm": f_["qk_norm"],
        "post_norms": f_["post_norms"],
        "embedding_scale": float(np.float32(math.sqrt(spec["n_embd"]))) if f_["embed_scale"] else None,
        "ffn_activation": f_["act"],
        "fused_qkv": f_["fused_qkv"],
        "fused_gate_up": f_["fused_gate_up"],
        "norm_weights_plus_one": bool(f_["norm_shift"]),
        "qk_rows_permuted": f_["permute_qk"],
        "hf_family": spec["family"],
    }
