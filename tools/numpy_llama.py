"""A Llama / Qwen2 / Gemma 3 forward pass in plain NumPy on the raw tensors of a GGUF file.

Why it exists: tokensieve's engine is checked against computations that share none of its code. Two
tools need the same small, readable forward pass: tools/make_reference.py (float32/float64 logits
beside HF transformers) and tools/crosscheck.py (a policy's token selection recomputed from the same
hidden states). crosscheck runs without PyTorch, so the forward pass lives here, in NumPy only, and
is cut into the steps of a layer (norm, Q/K/V, attention over an explicit mask, output projection,
FFN) so that a caller can change what runs between them.

Weights are `gguf.quants.dequantize` of the stored tensors, not un-permuted: llama GGUF files keep
each head's Q/K rows in llama.cpp's order, so RoPE rotates adjacent pairs (2i, 2i+1) as ggml_rope's
normal mode does; qwen2 files are stored unpermuted and rotate the pairs (i, i + d/2) (NeoX), and
they carry Q/K/V biases.

gemma3 (as llama.cpp's graph for it): the embedding times sqrt(n_embd) (a float32 number); NeoX RoPE;
head_dim from attention.key_length (query width n_head * head_dim need not be n_embd); an RMSNorm of
every Q and K head (attn_q_norm / attn_k_norm) before RoPE; the attention output and the FFN output
each RMS-normed (post_attention_norm / post_ffw_norm) before their residual add; GeGLU with GELU's tanh
approximation; every layer but each sixth ((i+1) % 6 == 0) attends only to the last
attention.sliding_window positions (itself included) and uses RoPE base 10000, the others the file's
rope.freq_base; tied output. Every norm weight is used as stored: llama.cpp's converter already added
the 1 of HF's x * (1 + w).
"""

from __future__ import annotations

import math

import gguf
import numpy as np


def read_metadata(path: str) -> dict:
    """Every GGUF key/value, except the large tokenizer arrays, which are replaced by their length."""
    reader = gguf.GGUFReader(path)
    meta = {}
    for key, field in reader.fields.items():
        if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                   "tokenizer.ggml.merges"):
            meta[key + ".count"] = len(field.data)
            continue
        try:
            meta[key] = field.contents()
        except Exception:  # pragma: no cover - exotic field types
            pass
    return meta


def load_raw_tensors(path: str) -> dict[str, np.ndarray]:
    """Every tensor dequantized to float32, shaped [rows][columns] (ggml's ne0 is the fastest dim)."""
    reader = gguf.GGUFReader(path)
    out = {}
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type)
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))
        out[t.name] = np.ascontiguousarray(w.reshape(shape), dtype=np.float32)
    return out


def causal_mask(n: int) -> np.ndarray:
    """allowed[i, j]: query i may read key j (j <= i)."""
    return np.tril(np.ones((n, n), dtype=bool))


ARCHITECTURES = ("llama", "qwen2", "gemma3")
GEMMA3_GLOBAL_EVERY = 6  # gemma3: layer i is global (no window, the file's RoPE base) iff (i+1) % 6 == 0
GEMMA3_ROPE_BASE_SWA = 10000.0  # gemma3: the sliding-window layers' RoPE base (not in the file; llama.cpp's)


class NumpyLlama:
    """The model of one GGUF file in one floating-point type (float32 or float64)."""

    def __init__(self, raw: dict[str, np.ndarray], meta: dict, dtype: type = np.float64):
        arch = meta["general.architecture"]
        if arch not in ARCHITECTURES:
            raise NotImplementedError(f"numpy_llama: architecture {arch!r} (only {', '.join(ARCHITECTURES)})")
        self.arch = arch
        self.n_layer = int(meta[f"{arch}.block_count"])
        self.n_embd = int(meta[f"{arch}.embedding_length"])
        self.n_head = int(meta[f"{arch}.attention.head_count"])
        self.n_head_kv = int(meta.get(f"{arch}.attention.head_count_kv", self.n_head))
        self.head_dim = int(meta.get(f"{arch}.attention.key_length", self.n_embd // self.n_head))
        assert int(meta.get(f"{arch}.attention.value_length", self.head_dim)) == self.head_dim
        self.n_rot = int(meta.get(f"{arch}.rope.dimension_count", self.head_dim))
        assert self.n_rot == self.head_dim, "partial rotary not handled"
        self.eps = float(meta[f"{arch}.attention.layer_norm_rms_epsilon"])
        self.rope_base = float(meta.get(f"{arch}.rope.freq_base", 10000.0))
        self.dtype = dtype
        self.w = {k: v.astype(dtype, copy=False) for k, v in raw.items()}
        self.tied_output = "output.weight" not in raw
        if self.tied_output:
            self.w["output.weight"] = self.w["token_embd.weight"]
        self.neox = arch in ("qwen2", "gemma3")
        freqs = raw.get("rope_freqs.weight")
        self.rope_freqs = None if freqs is None else freqs.astype(np.float64)
        gemma3 = arch == "gemma3"
        self.embed_scale = float(np.float32(math.sqrt(self.n_embd))) if gemma3 else None
        self.qk_norm = gemma3
        self.post_norms = gemma3
        self.ffn_act = "gelu_tanh" if gemma3 else "silu"
        self.sliding_window = int(meta[f"{arch}.attention.sliding_window"]) if gemma3 else 0
        self.swa_layers = [l for l in range(self.n_layer) if (l + 1) % GEMMA3_GLOBAL_EVERY != 0] if gemma3 else []
        self.rope_base_swa = GEMMA3_ROPE_BASE_SWA if gemma3 else None

    # --- the steps of a forward pass -----------------------------------------------------------------

    def embed(self, ids: list[int]) -> np.ndarray:
        x = self.w["token_embd.weight"][np.asarray(ids)]
        return x if self.embed_scale is None else x * self.dtype(self.embed_scale)

    def layer_rope_base(self, layer: int) -> float:
        return self.rope_base_swa if layer in self.swa_layers else self.rope_base

    def rope_tables(self, positions: np.ndarray, layer: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """cos and sin of position * base^(-2i/d) (divided by rope_freqs, Llama 3.1's per-frequency
        factors, when the file has them), [len(positions)][d/2], angles in float64. base is the layer's
        (gemma3's differs between layers, so there `layer` is required)."""
        if layer is None and self.swa_layers and self.rope_base_swa != self.rope_base:
            raise ValueError(f"{self.arch}: the RoPE base depends on the layer; pass rope_tables(..., layer)")
        base = self.rope_base if layer is None else self.layer_rope_base(layer)
        d = self.head_dim
        inv_freq = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        if self.rope_freqs is not None:
            inv_freq = inv_freq / self.rope_freqs
        ang = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
        return np.cos(ang).astype(self.dtype), np.sin(ang).astype(self.dtype)

    def rms_norm(self, x: np.ndarray, weight_name: str) -> np.ndarray:
        x2 = np.mean(x * x, axis=-1, keepdims=True)
        return x / np.sqrt(x2 + self.dtype(self.eps)) * self.w[weight_name]

    def rope(self, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """x: [T][heads][d] rotated at the positions of cos/sin's rows."""
        t, h, d = x.shape
        c, s = cos[:, None, :], sin[:, None, :]
        if self.neox:
            a, b = x[..., : d // 2], x[..., d // 2:]
            return np.concatenate((a * c - b * s, a * s + b * c), axis=-1)
        pairs = x.reshape(t, h, d // 2, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        return np.stack((a * c - b * s, a * s + b * c), axis=-1).reshape(t, h, d)

    def proj(self, x: np.ndarray, name: str) -> np.ndarray:
        y = x @ self.w[name + ".weight"].T
        bias = self.w.get(name + ".bias")
        return y if bias is None else y + bias

    def qkv(self, layer: int, normed: np.ndarray, cos: np.ndarray, sin: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Post-RoPE queries [T][n_head][d], keys and values [T][n_head_kv][d] of RMSNorm_attn(h)
        (gemma3: each Q and K head RMS-normed before RoPE)."""
        p, t, d = f"blk.{layer}.", normed.shape[0], self.head_dim
        q = self.proj(normed, p + "attn_q").reshape(t, self.n_head, d)
        k = self.proj(normed, p + "attn_k").reshape(t, self.n_head_kv, d)
        if self.qk_norm:
            q, k = self.rms_norm(q, p + "attn_q_norm.weight"), self.rms_norm(k, p + "attn_k_norm.weight")
        v = self.proj(normed, p + "attn_v").reshape(t, self.n_head_kv, d)
        return self.rope(q, cos, sin), self.rope(k, cos, sin), v

    def attention_mask(self, layer: int, n: int) -> np.ndarray:
        """causal_mask(n), narrowed on a sliding-window layer to the last sliding_window positions
        (j > i - window)."""
        allowed = causal_mask(n)
        if layer in self.swa_layers:
            i, j = np.indices((n, n))
            allowed &= j > i - self.sliding_window
        return allowed

    def attention_probs(self, q: np.ndarray, k: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """Softmax(q k^T / sqrt(d)) per query head, [n_head][Tq][Tk]; allowed[i, j] False: no
        attention (every query must be allowed some key). Query head h reads KV head h // group."""
        kv_of = np.arange(self.n_head) // (self.n_head // self.n_head_kv)
        s = np.einsum("thd,shd->hts", q, k[:, kv_of]) / self.dtype(math.sqrt(self.head_dim))
        s = np.where(allowed[None], s, -np.inf)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        return s / s.sum(axis=-1, keepdims=True)

    def attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """The attention output of each query, [Tq][n_head * d] (before the output projection)."""
        kv_of = np.arange(self.n_head) // (self.n_head // self.n_head_kv)
        a = np.einsum("hts,shd->thd", self.attention_probs(q, k, allowed), v[:, kv_of])
        return a.reshape(q.shape[0], self.n_head * self.head_dim)

    def attn_output(self, layer: int, a: np.ndarray) -> np.ndarray:
        """The attention block's contribution to the residual stream (gemma3: RMS-normed)."""
        y = a @ self.w[f"blk.{layer}.attn_output.weight"].T
        return self.rms_norm(y, f"blk.{layer}.post_attention_norm.weight") if self.post_norms else y

    def ffn(self, layer: int, x: np.ndarray) -> np.ndarray:
        """FFN(RMSNorm_ffn(x)), the SwiGLU (gemma3: GeGLU, then RMS-normed) block's contribution to the
        residual stream."""
        p = f"blk.{layer}."
        h = self.rms_norm(x, p + "ffn_norm.weight")
        g = h @ self.w[p + "ffn_gate.weight"].T
        u = h @ self.w[p + "ffn_up.weight"].T
        if self.ffn_act == "gelu_tanh":
            c = self.dtype(math.sqrt(2.0 / math.pi))
            act = self.dtype(0.5) * g * (1 + np.tanh(c * (g + self.dtype(0.044715) * g * g * g)))
        else:
            act = g * (0.5 * (1 + np.tanh(g / 2)))  # g * sigmoid(g) without overflow
        y = (act * u) @ self.w[p + "ffn_down.weight"].T
        return self.rms_norm(y, p + "post_ffw_norm.weight") if self.post_norms else y

    def output_logits(self, x: np.ndarray) -> np.ndarray:
        return self.rms_norm(x, "output_norm.weight") @ self.w["output.weight"].T

    # --- the dense model -------------------------------------------------------------------------------

    def logits(self, ids: list[int], last_only: bool = False) -> np.ndarray:
        """[T][n_vocab] logits of every position ([1][n_vocab]: the last one only), causal attention
        (through the window on a sliding-window layer)."""
        x = self.embed(ids)
        positions = np.arange(len(ids))
        for layer in range(self.n_layer):
            cos, sin = self.rope_tables(positions, layer)
            q, k, v = self.qkv(layer, self.rms_norm(x, f"blk.{layer}.attn_norm.weight"), cos, sin)
            x = x + self.attn_output(layer, self.attention(q, k, v, self.attention_mask(layer, len(ids))))
            x = x + self.ffn(layer, x)
        return self.output_logits(x[-1:] if last_only else x)
