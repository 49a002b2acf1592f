"""TokenButler's importance predictor (paper 001) in plain NumPy, read from its safetensors file.

Why it exists: tools/crosscheck.py recomputes the keys the engine's tokenbutler policy selects without engine
code, so the predictor's forward pass is written here again from its documented equations
(src/policies/tokenbutler/butler_net.h) and the file layout (butler_file.h), in float64:

    z = x W_in^T (E -> E/8);  q, k, v = z Wq^T, z Wk^T, z Wv^T;  RoPE(q, k) per head of size a = E/8 / H
    o = LayerNorm(causal softmax(q k^T / sqrt(a)) v)   (eps 1e-5, affine; no output projection)
    x' = x + GELU(o W_up^T + b_up) W_down^T + b_down    (erf GELU; back to E, residual)
    q_imp = SiLU(x' Wq1^T) Wq2^T,  k_imp = SiLU(x' Wk1^T) Wk2^T   (E -> I -> slots * d)
    RoPE(q_imp, k_imp) per slot of d; slot (layer, head) = (layer - first_layer) * n_query_heads + head

x is the LLM's layer-0 RMSNorm_attn output (gain included) of every position from 0. Every RoPE here pairs
(i, i + dim/2) (rotate-half) at angle position * base^(-2i/dim), base the file's rope_base; the frequencies
base^(-2i/dim) are float32 numbers, as the engine's (its predictor is float32 throughout), which moves an angle
by up to position * 3e-8 and would otherwise be the largest difference from the engine's at a few hundred
positions.

The file: 8-byte little-endian header length, a JSON header whose "__metadata__" holds the config as strings
(format tokensieve.tokenbutler.v1, n_embd, n_reduced, n_heads, n_layers, first_layer, n_query_heads, imp_dim,
inter, rope_base), then the tensors (F32 or F16, row-major [out][in]) at their data_offsets. `save_butler`
writes the same layout (tests use it for predictors with random weights).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

import numpy as np

FORMAT = "tokensieve.tokenbutler.v1"
LAYER_NORM_EPS = 1e-5
CONFIG_KEYS = ("n_embd", "n_reduced", "n_heads", "n_layers", "first_layer", "n_query_heads", "imp_dim", "inter")
DTYPES = {"F32": np.float32, "F16": np.float16}


@dataclass
class ButlerConfig:
    n_embd: int
    n_reduced: int
    n_heads: int
    n_layers: int
    first_layer: int
    n_query_heads: int
    imp_dim: int
    inter: int
    rope_base: float

    @property
    def n_slots(self) -> int:
        return (self.n_layers - self.first_layer) * self.n_query_heads

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every weight's name and shape, in file order."""
        e, r, i, o = self.n_embd, self.n_reduced, self.inter, self.n_slots * self.imp_dim
        return {"attn.in": (r, e), "attn.q": (r, r), "attn.k": (r, r), "attn.v": (r, r),
                "attn.norm.weight": (r,), "attn.norm.bias": (r,), "ffn.up.weight": (2 * r, r),
                "ffn.up.bias": (2 * r,), "ffn.down.weight": (e, 2 * r), "ffn.down.bias": (e,),
                "imp_q.hidden": (i, e), "imp_q.out": (o, i), "imp_k.hidden": (i, e), "imp_k.out": (o, i)}


def load_butler(path: str) -> tuple[ButlerConfig, dict[str, np.ndarray], dict[str, str]]:
    """The config, the weights (float64) and the metadata of a predictor file. A file that cannot be read
    raises OSError; one that is not a well-formed predictor file, ValueError (its message names the flaw)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: not a TokenButler predictor file ({len(blob)} bytes, no header length)")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise ValueError(f"{path}: not a TokenButler predictor file (header length {n} beyond the file's end)")
    try:
        header = json.loads(blob[8:8 + n])
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{path}: not a TokenButler predictor file (its header is not JSON)") from None
    meta = header.get("__metadata__", {}) if isinstance(header, dict) else None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ValueError(f"{path}: not a TokenButler predictor file (format {found!r})")
    try:
        config = ButlerConfig(*(int(meta[key]) for key in CONFIG_KEYS), float(meta["rope_base"]))
    except KeyError as e:
        raise ValueError(f"{path}: the metadata lacks {e.args[0]}") from None
    except (TypeError, ValueError):
        raise ValueError(f"{path}: the metadata's config is not numbers") from None
    c = config
    if (min(c.n_embd, c.n_reduced, c.n_heads, c.n_layers, c.n_query_heads, c.imp_dim, c.inter) <= 0
            or not 0 <= c.first_layer < c.n_layers or c.n_reduced % c.n_heads or c.n_reduced // c.n_heads % 2
            or c.imp_dim % 2):
        raise ValueError(f"{path}: the metadata's config is inconsistent ({c})")
    data = blob[8 + n:]
    weights = {}
    for name, shape in config.shapes().items():
        entry = header.get(name)
        try:
            begin, end = (int(i) for i in entry["data_offsets"])
            dtype = DTYPES[entry["dtype"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: tensor {name} is missing or has no F32/F16 dtype and data_offsets") from None
        if not 0 <= begin <= end <= len(data) or (end - begin) % np.dtype(dtype).itemsize:
            raise ValueError(f"{path}: tensor {name}'s data_offsets [{begin}, {end}] do not fit the file's "
                             f"{len(data)} data bytes")
        w = np.frombuffer(data[begin:end], dtype=np.dtype(dtype).newbyteorder("<"))
        if w.size != math.prod(shape):
            raise ValueError(f"{path}: tensor {name} has {w.size} values, the config needs {shape}")
        weights[name] = w.astype(np.float64).reshape(shape)
    return config, weights, meta


def save_butler(path: str, config: ButlerConfig, weights: dict[str, np.ndarray]) -> None:
    """Writes weights (float32) and config in the predictor file's layout."""
    meta = {"format": FORMAT, **{key: str(getattr(config, key)) for key in CONFIG_KEYS},
            "rope_base": f"{config.rope_base:f}"}
    header, blobs, offset = {"__metadata__": meta}, [], 0
    for name, shape in config.shapes().items():
        w = np.ascontiguousarray(weights[name], dtype="<f4").reshape(shape)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + w.nbytes]}
        blobs.append(w.tobytes())
        offset += w.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def random_butler(config: ButlerConfig, seed: int) -> dict[str, np.ndarray]:
    """Weights as the paper initialises them: xavier-uniform matrices, zero biases, LayerNorm gain 1."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in config.shapes().items():
        if len(shape) == 1:
            weights[name] = np.ones(shape) if name == "attn.norm.weight" else np.zeros(shape)
        else:
            bound = math.sqrt(6.0 / (shape[0] + shape[1]))
            weights[name] = rng.uniform(-bound, bound, shape)
    return weights


def rope_half(x: np.ndarray, dim: float, base: float) -> np.ndarray:
    """x [T][..][dim] rotated at positions 0..T-1, pairs (i, i + dim/2)."""
    t, half = x.shape[0], x.shape[-1] // 2
    inv_freq = (base ** (-2.0 * np.arange(half) / dim)).astype(np.float32).astype(np.float64)
    ang = np.arange(t, dtype=np.float64)[:, None] * inv_freq[None, :]
    shape = (t,) + (1,) * (x.ndim - 2) + (half,)
    c, s = np.cos(ang).reshape(shape), np.sin(ang).reshape(shape)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate((a * c - b * s, a * s + b * c), axis=-1)


_erf = np.vectorize(math.erf, otypes=[np.float64])


class NumpyButler:
    """The predictor of one file, float64."""

    def __init__(self, path: str):
        self.config, self.w, self.metadata = load_butler(path)

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Post-RoPE importance queries and keys [T][slots][d] of the rows x [T][E] at positions 0..T-1."""
        c, w = self.config, self.w
        t, r = x.shape[0], c.n_reduced
        hs = r // c.n_heads
        z = x @ w["attn.in"].T
        heads = (t, c.n_heads, hs)
        q = rope_half((z @ w["attn.q"].T).reshape(heads), hs, c.rope_base)
        k = rope_half((z @ w["attn.k"].T).reshape(heads), hs, c.rope_base)
        v = (z @ w["attn.v"].T).reshape(heads)
        s = np.einsum("thd,shd->hts", q, k) / math.sqrt(hs)
        s = np.where(np.tril(np.ones((t, t), dtype=bool))[None], s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        o = np.einsum("hts,shd->thd", p, v).reshape(t, r)
        o = (o - o.mean(axis=1, keepdims=True)) / np.sqrt(o.var(axis=1, keepdims=True) + LAYER_NORM_EPS)
        o = o * w["attn.norm.weight"] + w["attn.norm.bias"]
        up = o @ w["ffn.up.weight"].T + w["ffn.up.bias"]
        up = 0.5 * up * (1 + _erf(up / math.sqrt(2)))
        x_res = x + up @ w["ffn.down.weight"].T + w["ffn.down.bias"]

        def net(hidden: np.ndarray, out: np.ndarray) -> np.ndarray:
            pre = x_res @ hidden.T
            y = (pre * (0.5 * (1 + np.tanh(pre / 2)))) @ out.T  # SiLU: pre * sigmoid(pre), without overflow
            return rope_half(y.reshape(t, c.n_slots, c.imp_dim), c.imp_dim, c.rope_base)

        return net(w["imp_q.hidden"], w["imp_q.out"]), net(w["imp_k.hidden"], w["imp_k.out"])

    def slot(self, layer: int, head: int) -> int:
        return (layer - self.config.first_layer) * self.config.n_query_heads + head
