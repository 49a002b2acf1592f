#!/usr/bin/env python3
"""Cross-check a token-sparsification policy's selection against an independent NumPy recomputation.

Why: Token Filtering and ZipVL did not reproduce their papers' claims on SmolLM2, KVSink-5 narrowly
lost to Preserve-First-5 under INT2 KIVI, OrthoRank lost to layer removal on Qwen2.5-0.5B and TokenButler
to every baseline (docs/results/).
Before calling that the method's failure we must know the engine selects the tokens the method
says it should. This tool runs the engine on one prompt with a policy and its DecisionLog, then
recomputes the selection in float64 from the dequantized GGUF weights with the NumPy forward pass
of tools/numpy_llama.py (no engine code, no PyTorch), and compares them layer by layer.

What the reference does, per layer, over the prompt's token ids (from `tokensieve tokenize`):
  * RMSNorm, Q/K/V, RoPE in float64; the policy's rule, re-implemented from the paper's equations
    and the engine's documented semantics (src/policies/*/ headers), decides the layer's tokens;
  * the forward pass then goes on with the engine's decisions from the DecisionLog (which tokens
    ran attention and the FFN, whose K/V were cached), so that one decision flipped by a near-tie
    cannot cascade into later layers or into Token Filtering's threshold controller: every decision
    is judged on its own, with its margin (how far the reference's quantity is from flipping it).
    When no decision differs, this run is the reference's own free run;
  * attention reads K/V rounded to IEEE half, the engine's KV-cache format; the policy's scores
    read the unrounded post-RoPE K/V (and queries), as the engine's hooks do.
The engine runs with --exact (float32 activations in its matrix products; its default 8-bit
activations are an approximation checked elsewhere, whose effect --no-exact shows), -t 1, greedy,
one new token, whose text is checked against the reference's argmax at the end.

Policies covered: tokenfilter (options ratio, tail, lr, threshold, decay, fusion=printed|intent|
mean, select=kv|k|v, kv=drop|cache), zipvl (tau, probes=N|all, seed, score=normalized|sum),
orthorank (layers=LIST or profile=FILE, ratio, select=ortho|reverse|random, seed, stage=normed|
residual, kv=all|selected; see OrthoRankReference), kvquant;kvsink (below) and tokenbutler (keep,
predictor=FILE, sinks, first_layer, recent, shared=0|1, keys=f16|i8, every option the engine has; see
TokenButlerReference). Verdict per policy: "agree" (identical selections), "agree up to near-ties" (every
difference has a margin below --tie-tol) or "DISAGREE"; exit code 0 when every policy agrees, 1 when one does
not. Bad input (a spec, a missing or malformed model, profile or predictor file, an engine run that fails) ends
in one line `crosscheck: <reason>` on stderr and exit code 2.

OrthoRank (paper 000) decides before Q/K/V which tokens run a chosen layer at all: the selected run
attention and FFN, the others keep their hidden state (and write K/V unless kv=selected), so the log
must flag ran_attention = ran_ffn for exactly the selected. A token's margin is its score's relative
distance from the cut midway between the k-th and (k+1)-th smallest scores, (cut - s) / |cut|. The
log also holds the engine's float32 scores: they must equal the reference's within --score-tol,
relative to the larger of the score and the cut (float32 rounding, amplified where it rounds a K/V
value to another half, moves them by about 1e-4 to 2e-3 of the cut on SmolLM2 and Qwen2.5-0.5B), and
the flags must be exactly the rule applied to them. The two are reported apart: a score beyond --score-tol is
score drift (with --no-exact's 8-bit activations up to ~8% on SmolLM2, expected); flags that are not the rule
applied to the engine's own logged scores make the log inconsistent with the policy.

KVSink (paper 002), a kvquant spec and a kvsink spec joined by ';' (kvquant: bits, group,
mode=token|kivi, residual, prefill=full|quantized, dynamic ranges; kvsink: k and profile=FILE or
layer=L,channel=C): the k prompt tokens of largest |h[:, C]| after block L, from a forward whose
attention in blocks 0..L reads the K/V cache as the engine does (prefill=quantized: round-to-nearest
codes, KIVI blocks, keys scored against 8-bit rounded queries, see KvQuantFormat), against the
tokens the log flags kv_full_precision in layers L+1..last (and in no earlier layer); the margin is
each token's relative distance from the cut between the k-th and (k+1)-th |h|. A low-bit forward
can turn a last-bit difference into another top k, so when codes are read before the decision,
--members reference forwards with one-ulp noise on Q/K/V measure which decisions that noise flips:
"agree within float32 sensitivity" when every difference is one of those (and the next token is the
engine's, or within that noise of it).

TokenButler (paper 001) selects keys, not tokens: the engine runs with --decision-log-keys, which logs the
keys each (position, query head) attended at each layer. The reference recomputes the predictor in float64
from its safetensors file (tools/numpy_butler.py) on the reference's layer-0 RMSNorm_attn output, ranks
every candidate key of every (position, query head) of layers >= first_layer by q_imp . k_imp with the
importance keys rounded as the engine stores them (half precision by default; keys=i8 codes and integer
queries), and compares the lists; attention then reads exactly the engine's lists. A differing key's margin
is its score's distance from the cut midway between the budget-th and next score of its row, relative to
the row's spread (max - min). Rounding to half precision (or int8) turns a float32 difference at a rounding
midpoint into a whole step: the margin counts as a near-tie net of that reach, the most the stored values
within ROUND_TOL of a midpoint can move the key's score and the row's cut (a few 1e-4 of the spread).

    python3 tools/crosscheck.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf
    python3 tools/crosscheck.py -m ../shared/models/stories260K.gguf --policy zipvl:tau=0.9,probes=all -v
    python3 tools/crosscheck.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf \
        --policy orthorank:profile=profiles/smollm2-135m-orthorank-sleb-20.json -v
    python3 tools/crosscheck.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf --policy \
        'kvquant:bits=2,group=128,mode=kivi,prefill=quantized;kvsink:k=5,profile=profiles/smollm2-135m-kvsink.json'
    python3 tools/crosscheck.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf \
        --policy tokenbutler:keep=0.5,predictor=predictors/smollm2-135m-instruct.butler-2k.safetensors -v
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import gguf
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gguf_vocab import byte_alphabet  # noqa: E402
from numpy_butler import NumpyButler  # noqa: E402
from numpy_llama import NumpyLlama, causal_mask, load_raw_tensors, read_metadata  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_BIN = REPO / "build" / "bin" / "tokensieve"
DEFAULT_POLICIES = ["tokenfilter:ratio=0.3", "zipvl:tau=0.975"]
DEFAULT_TIE_TOL = 1e-4
DEFAULT_SCORE_TOL = 1e-2
DEFAULT_DATA = pathlib.Path(os.environ.get("TS_DATA_DIR", REPO.parent / "shared" / "data"))
DEFAULT_TEXT = DEFAULT_DATA / "wikitext2" / "wiki.test.raw"


# --------------------------------------------------------------------------------------------------
# inputs: prompt, engine run, decision log


class CrosscheckError(Exception):
    """Bad input: a spec, a file, a model, an engine run that failed. main() prints `crosscheck: <message>`
    (one line) and exits 2."""


def os_reason(e: OSError) -> str:
    return e.strerror or str(e)


def wikitext_prompt(path: pathlib.Path, chars: int) -> str:
    """The first paragraph longer than `chars` of a WikiText-2 file, cut back to a word boundary within
    `chars`."""
    try:
        with open(path, encoding="utf-8") as f:
            paragraph = next((line for line in f if len(line) > chars), None)
    except OSError as e:
        raise CrosscheckError(f"--text {path}: {os_reason(e)}") from None
    except UnicodeDecodeError:
        raise CrosscheckError(f"--text {path}: not UTF-8 text") from None
    if paragraph is None:
        raise CrosscheckError(f"--text {path}: no paragraph longer than {chars} characters")
    paragraph = paragraph.rstrip("\n")
    cut = paragraph.rfind(" ", 0, chars)
    if cut < 0:
        raise CrosscheckError(f"--text {path}: no word boundary in the first {chars} characters of its paragraph")
    return paragraph[:cut]


def number(options: dict[str, str], key: str, default: float | int | str | None, policy: str,
           kind: type = float) -> float | int:
    """options[key] (else default) as kind; a value that is not one is bad input."""
    value = options.get(key, default)
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise CrosscheckError(f"{policy} {key}={value} is not {'an integer' if kind is int else 'a number'}"
                              ) from None


def choice(options: dict[str, str], key: str, allowed: tuple[str, ...], policy: str) -> str:
    """options[key], one of `allowed` (the first, the default, when absent)."""
    value = options.get(key, allowed[0])
    if value not in allowed:
        raise CrosscheckError(f"{policy} {key}={value} is not one of {'|'.join(allowed)}")
    return value


def read_profile(path: str, policy: str) -> dict:
    """A profile file's JSON object."""
    try:
        with open(path, encoding="utf-8") as f:
            profile = json.load(f)
    except OSError as e:
        raise CrosscheckError(f"{policy} profile {path}: {os_reason(e)}") from None
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        raise CrosscheckError(f"{policy} profile {path}: not a JSON file") from None
    if not isinstance(profile, dict):
        raise CrosscheckError(f"{policy} profile {path}: not a JSON object")
    return profile


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    name, _, rest = spec.partition(":")
    options = {}
    key = None
    for item in filter(None, rest.split(",")):
        head, eq, value = item.partition("=")
        if eq:
            key = head
            options[key] = value
        elif key is not None:  # a list goes on (layers=3,5,8-11), as in the engine's PolicySpec::parse
            options[key] += "," + item
        else:
            raise CrosscheckError(f"cannot read option {item!r} of {spec!r}")
    return name, options


def run_tool(binary: pathlib.Path, args: list[str], what: str) -> subprocess.CompletedProcess:
    """`binary args`; when it fails, a CrosscheckError with the last line of its stderr (the engine's
    `error: ...`)."""
    try:
        res = subprocess.run([str(binary), *args], capture_output=True)
    except OSError as e:
        raise CrosscheckError(f"cannot run {binary}: {os_reason(e)}") from None
    if res.returncode != 0:
        lines = res.stderr.decode(errors="replace").strip().splitlines()
        raise CrosscheckError(f"{what}: " + (lines[-1].strip() if lines else f"exit code {res.returncode}"))
    return res


def tokenize(binary: pathlib.Path, model: str, prompt: str) -> list[int]:
    res = run_tool(binary, ["tokenize", "-m", model, "-t", "1", "-p", prompt], f"{pathlib.Path(binary).name} tokenize")
    return json.loads(res.stdout)


@dataclass
class EngineRun:
    flags: np.ndarray  # [layer][position] TokenFlag bits of the DecisionLog
    legend: dict[str, int]
    new_text: bytes  # the greedy token printed after the prompt
    # [layer] the scores the deciding policy reported per position (None: none at that layer); +inf,
    # which JSON cannot hold, is logged as null and read back as inf
    scores: list[np.ndarray | None] = field(default_factory=list)
    # [layer] with --decision-log-keys: keys[head][t][j], query head `head` of position t attended key j (None:
    # the layer selected no keys)
    key_lists: list[np.ndarray | None] = field(default_factory=list)


def run_engine(binary: pathlib.Path, model: str, prompt: str, spec: str, exact: bool = True) -> EngineRun:
    """`spec` may join several policies with ';' (kvquant + kvsink): one --policy each, in order."""
    with tempfile.TemporaryDirectory() as tmp:
        log_path = os.path.join(tmp, "decisions.json")
        policies = [a for part in spec.split(";") for a in ("--policy", part)]
        lists = any(part.partition(":")[0] in KEY_POLICIES for part in spec.split(";"))
        args = ["run", "-m", model, "-p", prompt, "-n", "1", "--temp", "0", "-t", "1",
                *policies, "--decision-log", log_path] + (["--exact"] if exact else []) + (
                    ["--decision-log-keys"] if lists else [])
        res = run_tool(binary, args, f"{pathlib.Path(binary).name} run --policy {spec}")
        with open(log_path, encoding="utf-8") as f:
            log = json.load(f)
    printed, echo = res.stdout, prompt.encode()
    if not (printed.startswith(echo) and printed.endswith(b"\n")):
        raise CrosscheckError(f"`{pathlib.Path(binary).name} run` printed {printed[-200:]!r}, not the prompt and "
                              "one token")
    scores = [None if row is None else np.array([np.inf if v is None else v for v in row], dtype=np.float64)
              for row in log.get("scores", [])]
    return EngineRun(np.array(log["flags"], dtype=np.int64), log["legend"], printed[len(echo):-1], scores,
                     [None if layer is None else key_mask(layer) for layer in log.get("key_lists", [])])


def key_mask(lists: list[list[list[int]]]) -> np.ndarray:
    """A layer's key_lists ([position][query head] -> key positions) as keys[head][t][j]."""
    n, heads = len(lists), len(lists[0]) if lists else 0
    keys = np.zeros((heads, n, n), dtype=bool)
    for t, row in enumerate(lists):
        for h, positions in enumerate(row):
            keys[h, t, positions] = True
    return keys


@functools.lru_cache(maxsize=4)
def vocab_texts(path: str) -> tuple[bytes, ...]:
    """The text of every token as the engine prints it: GPT-2 byte spelling or SentencePiece pieces."""
    reader = gguf.GGUFReader(path)
    pieces = reader.fields["tokenizer.ggml.tokens"].contents()
    if reader.fields["tokenizer.ggml.model"].contents() == "gpt2":
        byte_of = {ch: b for b, ch in enumerate(byte_alphabet())}
        return tuple(bytes(byte_of[ch] for ch in piece) if all(ch in byte_of for ch in piece) else piece.encode()
                     for piece in pieces)
    out = []
    for piece in pieces:
        m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
        out.append(bytes([int(m.group(1), 16)]) if m else piece.replace("\u2581", " ").encode())
    return tuple(out)


def token_bytes(path: str, token_id: int) -> bytes:
    return vocab_texts(path)[token_id]


# --------------------------------------------------------------------------------------------------
# the policies, recomputed


@dataclass
class LayerDecision:
    """The reference's choice at one layer: kept[t] = token t runs attention. margin[t] is the signed
    distance of the deciding quantity from flipping t's decision (NaN: not decided by a score);
    `explain` gives the margin that accounts for a difference from the engine's kept set."""

    kept: np.ndarray
    margin: np.ndarray
    explain: Callable[[np.ndarray], np.ndarray]
    note: str = ""
    scores: np.ndarray | None = None  # what the rule ranked, to compare with the scores the log holds
    cut: float = np.nan  # the score between the kept and the others (the scale of a score's error)


def reject_unknown(options: dict[str, str], allowed: set[str], policy: str) -> None:
    unknown = set(options) - allowed
    if unknown:
        raise CrosscheckError(f"{policy} option(s) {sorted(unknown)} are not covered by the cross-check")


class TokenFilterReference:
    """Token Filtering (paper 003; src/policies/token_filter/token_filter.h): in the last round(tail*L)
    layers every token after the first compares its post-RoPE key and value, per KV head, with EMA
    anchors of the previous tokens' (cosine); s = mean over heads, sigma^2 = population variance over
    heads; S = alpha*s_k + (1-alpha)*s_v with Eq. 1's alpha; the layer's threshold moves by
    lr*(skip rate so far - P) before each decision (Eq. 4) and the token skips attention when S > T."""

    def __init__(self, options: dict[str, str], model: NumpyLlama):
        reject_unknown(options, {"ratio", "tail", "lr", "threshold", "decay", "fusion", "select", "kv"},
                       "tokenfilter")
        self.ratio = number(options, "ratio", 0.5, "tokenfilter")
        tail = number(options, "tail", 0.5, "tokenfilter")
        if not np.isfinite(tail):
            raise CrosscheckError(f"tokenfilter tail={tail} is not a finite number")
        n = min(max(int(np.floor(tail * model.n_layer + 0.5)), 1), model.n_layer)
        self.layers = set(range(model.n_layer - n, model.n_layer))
        self.target = self.ratio * model.n_layer / n
        if self.target > 1 + 1e-9:
            raise CrosscheckError(f"tokenfilter ratio {self.ratio} exceeds what {n} layers can skip")
        self.lr = number(options, "lr", 0.01, "tokenfilter")
        self.threshold0 = number(options, "threshold", 0.5, "tokenfilter")
        self.decay = number(options, "decay", 0.9, "tokenfilter")
        select = choice(options, "select", ("kv", "k", "v"), "tokenfilter")
        self.fusion = {"k": "key", "v": "value"}.get(select, choice(options, "fusion", ("printed", "intent", "mean"),
                                                                    "tokenfilter"))
        self.cache_skipped_kv = choice(options, "kv", ("drop", "cache"), "tokenfilter") == "cache"

    @staticmethod
    def _head_similarity(x: np.ndarray, anchor: np.ndarray) -> tuple[float, float]:
        """Mean and population variance over heads of cos(x[h], anchor[h]); a zero vector: cosine 0."""
        norms = np.linalg.norm(x, axis=1) * np.linalg.norm(anchor, axis=1)
        cos = np.where(norms > 0, np.sum(x * anchor, axis=1) / np.where(norms > 0, norms, 1), 0.0)
        return float(cos.mean()), float(cos.var())

    def _key_weight(self, var_k: float, var_v: float) -> float:
        vk, vv = var_k + 1e-12, var_v + 1e-12  # the engine's floor: two zero variances give 1/2
        weights = {"printed": vk / (vk + vv), "intent": vv / (vk + vv), "mean": 0.5, "key": 1.0, "value": 0.0}
        return weights[self.fusion]

    def decide(self, layer: int, q: np.ndarray, k: np.ndarray, v: np.ndarray,
               engine_kept: np.ndarray) -> LayerDecision:
        n = k.shape[0]
        kept, margin = np.ones(n, dtype=bool), np.full(n, np.nan)
        anchor_k, anchor_v = k[0].copy(), v[0].copy()  # the first token seeds the anchors, never skips
        threshold, decided, skipped = self.threshold0, 0, 0
        w = 1 - self.decay
        for t in range(1, n):
            mk, var_k = self._head_similarity(k[t], anchor_k)
            mv, var_v = self._head_similarity(v[t], anchor_v)
            anchor_k += w * (k[t] - anchor_k)
            anchor_v += w * (v[t] - anchor_v)
            alpha = self._key_weight(var_k, var_v)
            score = alpha * mk + (1 - alpha) * mv
            if self.target <= 0 or self.target >= 1:
                kept[t] = self.target <= 0
            else:
                if decided:
                    threshold += self.lr * (skipped / decided - self.target)
                margin[t] = score - threshold
                kept[t] = not score > threshold
            decided += 1
            skipped += int(not engine_kept[t])  # the controller counts the engine's decisions
        # A difference where no score decided (the first token, a target of 0 or 1) is never a near-tie.
        return LayerDecision(kept, margin, lambda diff: np.nan_to_num(np.abs(margin[diff]), nan=np.inf))


def mt19937_64(seed: int):
    """std::mt19937_64 (C++11 [rand.predef]), the engine's probe sampler."""
    mask = (1 << 64) - 1
    mt = [seed & mask]
    for i in range(1, 312):
        mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & mask)
    index = 312
    while True:
        if index == 312:
            for i in range(312):
                x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
                mt[i] = mt[(i + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            index = 0
        y = mt[index]
        index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        yield y ^ (y >> 43)


class ZipVLReference:
    """ZipVL (paper 004; src/policies/zipvl/zipvl.h): at every layer of the prompt, probe queries (the
    last n_probes/2 rows and n_probes/2 distinct rows drawn by Floyd's method from the others with
    mt19937_64(seed * 0x9e3779b97f4a7c15 + layer); every row when n <= n_probes) attend causally with
    every query head; a_j = attention column sums, nnz_j = (probe, head) rows at positions >= j;
    p = fewest tokens whose largest a_j reach tau of the total (eq. 7); the kept tokens are the p
    largest a_j / nnz_j (eq. 8-9; ties to the later token)."""

    def __init__(self, options: dict[str, str], model: NumpyLlama):
        reject_unknown(options, {"tau", "probes", "seed", "score"}, "zipvl")
        self.layers = set(range(model.n_layer))
        self.tau = number(options, "tau", 0.975, "zipvl")
        self.n_probes = 0 if options.get("probes") == "all" else number(options, "probes", "128", "zipvl", int)
        self.seed = number(options, "seed", 0, "zipvl", int)
        self.normalized = choice(options, "score", ("normalized", "sum"), "zipvl") == "normalized"
        self.cache_skipped_kv = False
        self.model = model

    def probe_rows(self, n: int, layer: int) -> list[int]:
        if self.n_probes == 0 or n <= self.n_probes:
            return list(range(n))
        recent = self.n_probes // 2
        n_random, pool = self.n_probes - recent, n - recent
        rng = mt19937_64((self.seed * 0x9E3779B97F4A7C15 + layer) & ((1 << 64) - 1))
        rows: list[int] = []
        for top in range(pool - n_random, pool):
            r = next(rng) % (top + 1)
            rows.append(top if r in rows else r)
        return sorted(rows + list(range(pool, n)))

    def decide(self, layer: int, q: np.ndarray, k: np.ndarray, v: np.ndarray,
               engine_kept: np.ndarray) -> LayerDecision:
        n = k.shape[0]
        probes = self.probe_rows(n, layer)
        probs = self.model.attention_probs(q[probes], k, causal_mask(n)[probes])  # [head][probe][token]
        col_sum = probs.sum(axis=(0, 1))
        nnz = np.zeros(n)
        nnz[probes] = self.model.n_head
        nnz = np.cumsum(nnz[::-1])[::-1]
        mass = np.cumsum(np.sort(col_sum)[::-1]) / col_sum.sum()  # mass[i]: share of the i+1 largest
        p = int(np.argmax(mass >= self.tau)) + 1 if self.tau < 1 else n
        score = col_sum / nnz if self.normalized else col_sum
        order = np.lexsort((-np.arange(n), -score))  # descending score, ties to the later token

        def top(count: int) -> tuple[np.ndarray, np.ndarray]:
            """The `count` best tokens and each token's relative distance from the cut below them."""
            kept = np.zeros(n, dtype=bool)
            kept[order[:count]] = True
            if count == n:
                return kept, np.full(n, np.inf)
            cut = (score[order[count - 1]] + score[order[count]]) / 2
            return kept, (score - cut) / cut

        kept, margin = top(p)
        p_engine = int(engine_kept.sum())

        def explain(diff: np.ndarray) -> np.ndarray:
            """With the engine's count p' = p: how near its cut each differing token's score is. With
            p' != p: how far tau is from the reference's cumulative mass at p' (the count is then a
            near-tie) or, if larger, how near the cut of the reference's top p' the tokens on which
            that set and the engine's differ are."""
            if p_engine == p:
                return np.abs(margin[diff])
            crossing = self.tau - mass[p_engine - 1] if p_engine < p else mass[p_engine - 2] - self.tau
            ranked, margin_e = top(p_engine)
            worst_rank = np.abs(margin_e[ranked != engine_kept]).max(initial=0.0)
            return np.full(int(diff.sum()), max(crossing, worst_rank))

        p_margin = min(mass[p - 1] - self.tau, self.tau - mass[p - 2] if p > 1 else np.inf)
        note = f"p = {p} of {n} (engine {p_engine}), tau {p_margin:.2e} from changing p"
        return LayerDecision(kept, margin, explain, note)


def uniform_at(seed: int, layer: int, pos: int) -> float:
    """policies/position_hash.h: splitmix64 of (seed, layer, position), the top 24 bits over 2^24."""
    mask = (1 << 64) - 1
    z = (seed + 0x9E3779B97F4A7C15 * (1 + (layer << 32 | pos))) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return ((z ^ (z >> 31)) >> 40) / float(1 << 24)


class OrthoRankReference:
    """OrthoRank (paper 000; src/policies/orthorank/orthorank.h): in the chosen layers (layers=LIST or
    the profile's) token i's score is |h_0 . h_i|, h = RMSNorm_attn(h) with its gain (stage=residual:
    the residual stream h), h_0 the first position's, whose own score is +inf; the k = int(ratio * N)
    smallest scores of the N prompt tokens (ties to the earlier position) run the layer, attention and
    FFN; the others keep their hidden state and still write K/V (kv=selected: not). select=reverse ranks
    -|h_0 . h_i| (the largest run), select=random a uniform number of (seed, layer, position). ratio:
    the option, else the profile's, else 0.333. The engine ranks the whole prompt in one pass
    (ranks_whole_calls), so Algorithm 1's top k over the prompt is the rule."""

    selects_tokens = True  # decides, before Q/K/V, which tokens run the whole layer (the select_tokens hook)

    def __init__(self, options: dict[str, str], model: NumpyLlama):
        reject_unknown(options, {"layers", "profile", "ratio", "select", "seed", "stage", "kv"}, "orthorank")
        if ("layers" in options) == ("profile" in options):
            raise CrosscheckError("orthorank needs exactly one of layers=LIST and profile=FILE")
        ratio = None
        if "profile" in options:
            path = options["profile"]
            profile = read_profile(path, "orthorank")
            if profile.get("policy") != "orthorank":
                raise CrosscheckError(f"{path} is a {profile.get('policy')!r} profile, not orthorank's")
            try:
                layers = [int(layer) for layer in profile["layers"]]
            except KeyError:
                raise CrosscheckError(f"orthorank profile {path} has no \"layers\"") from None
            except (TypeError, ValueError):
                raise CrosscheckError(f"orthorank profile {path}: \"layers\" is not a list of integers") from None
            ratio = profile.get("ratio")
        else:
            layers = []
            for item in options["layers"].split(","):
                lo, _, hi = item.partition("-")
                try:
                    layers += range(int(lo), int(hi or lo) + 1)
                except ValueError:
                    raise CrosscheckError(f"orthorank layers={options['layers']} is not a list of integers and "
                                          "ranges like 3,5,8-11") from None
        self.layers = set(layers)
        if not self.layers or min(self.layers) < 0 or max(self.layers) >= model.n_layer:
            raise CrosscheckError(f"orthorank layers {sorted(self.layers)} outside the model's {model.n_layer}")
        self.ratio = number(options, "ratio", 0.333 if ratio is None else ratio, "orthorank")
        self.select_rule = choice(options, "select", ("ortho", "reverse", "random"), "orthorank")
        self.seed = number(options, "seed", 0, "orthorank", int)
        self.residual = choice(options, "stage", ("normed", "residual"), "orthorank") == "residual"
        self.cache_skipped_kv = choice(options, "kv", ("all", "selected"), "orthorank") == "all"

    def scores(self, layer: int, x: np.ndarray, normed: np.ndarray) -> np.ndarray:
        """Each prompt position's score at `layer` (the sink's: +inf), x: the layer's input h."""
        n = x.shape[0]
        if self.select_rule == "random":
            s = np.array([uniform_at(self.seed, layer, pos) for pos in range(n)])
        else:
            h = x if self.residual else normed
            s = np.abs(h @ h[0])
            s = np.where(np.isnan(s), np.inf, -s if self.select_rule == "reverse" else s)
        s[0] = np.inf
        return s

    def rank(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """The k = int(ratio * N) smallest of the scores s (ties to the earlier position, ContextRank's
        order): which are kept, the ascending order, k."""
        n = len(s)
        k = int(self.ratio * n)
        order = np.lexsort((np.arange(n), s))
        kept = np.zeros(n, dtype=bool)
        kept[order[:k]] = True
        return kept, order, k

    def select(self, layer: int, x: np.ndarray, normed: np.ndarray, engine_kept: np.ndarray) -> LayerDecision:
        s = self.scores(layer, x, normed)
        n = len(s)
        kept, order, k = self.rank(s)
        cut = (s[order[k - 1]] + s[order[k]]) / 2 if 0 < k < n else np.nan
        if np.isfinite(cut) and cut != 0:
            margin = (cut - s) / abs(cut)  # positive: selected; relative to the cut's score
            gap = (f"#{k} {s[order[k - 1]]:.6g} (token {order[k - 1]}) vs #{k + 1} {s[order[k]]:.6g} "
                   f"(token {order[k]}), cut {cut:.6g}")
        else:  # no cut to be near (k = 0 or n, or one through the sink's +inf): no near-tie
            margin = np.where(kept, np.inf, -np.inf)
            gap = "no finite cut"
        note = f"keeps k = {k} of {n} (engine {int(engine_kept.sum())}): {gap}"
        return LayerDecision(kept, margin, lambda diff: np.abs(margin[diff]), note, s, cut)


POLICIES = {"tokenfilter": TokenFilterReference, "zipvl": ZipVLReference, "orthorank": OrthoRankReference}


# --------------------------------------------------------------------------------------------------
# the reference forward pass and the comparison


@dataclass
class LayerCheck:
    layer: int
    engine_kept: np.ndarray
    ref_kept: np.ndarray
    diff_margins: np.ndarray  # for each token whose decision differs, the margin explaining it
    closest: float  # the smallest |margin| among the decisions that agree
    note: str

    def describe(self) -> str:
        differ = ", ".join(f"{t} ({m:.2e})" for t, m in zip(np.flatnonzero(self.engine_kept != self.ref_kept),
                                                            self.diff_margins))
        return (f"layer {self.layer:2d}: engine keeps {int(self.engine_kept.sum()):4d}, reference "
                f"{int(self.ref_kept.sum()):4d}; closest agreeing margin {self.closest:.2e}; {self.note}"
                + (f"; differ at token (margin) {differ}" if differ else ""))


@dataclass
class PolicyCheck:
    spec: str
    n_tokens: int
    layers: list[LayerCheck] = field(default_factory=list)
    flag_errors: list[str] = field(default_factory=list)
    next_token: str = ""
    next_token_ok: bool = True
    scores: str = ""  # how the engine's logged scores compare with the reference's, when the log has them
    # the logged scores beyond --score-tol (what the engine ranked drifts from the reference's quantity, e.g. under
    # --no-exact's 8-bit activations): apart from flag_errors, which say the log contradicts the rule itself
    score_drift: str = ""

    identical_what = "selections"  # what "agree: identical ... at every layer" names

    def n_decisions(self) -> int:
        return sum(len(c.engine_kept) for c in self.layers)

    def n_diff(self) -> int:
        return sum(len(c.diff_margins) for c in self.layers)

    def worst(self) -> float:
        return max((float(c.diff_margins.max()) for c in self.layers if len(c.diff_margins)), default=0.0)

    def selections_ok(self, tie_tol: float) -> bool:
        """Every differing decision is a near-tie and the next token is the reference's."""
        return self.next_token_ok and self.worst() < tie_tol

    def ok(self, tie_tol: float) -> bool:
        return not self.flag_errors and not self.score_drift and self.selections_ok(tie_tol)

    def summary(self) -> str:
        """What was compared: the tail of every verdict line."""
        closest = min(c.closest for c in self.layers)
        return (f"{self.spec}: {self.n_decisions()} token-layer decisions over {len(self.layers)} layers "
                f"({self.n_tokens} tokens); closest agreeing margin {closest:.2e}; "
                + (f"{self.scores}; " if self.scores else "") + self.next_token)

    def differences(self, near_ties: bool, tie_tol: float) -> str:
        """The differing decisions, read as near-ties (near_ties) or not."""
        if near_ties:
            return f"{self.n_diff()} decisions differ, every one within {self.worst():.2e} < {tie_tol:g} of flipping"
        return f"{self.n_diff()} decisions differ (largest margin {self.worst():.2e})"

    def verdict(self, tie_tol: float) -> str:
        what = self.summary()
        if self.flag_errors:
            return (f"DISAGREE {what}; log inconsistent with the policy: {self.flag_errors[0]}"
                    + (f"; {self.score_drift}" if self.score_drift else ""))
        # score drift alone: the engine ranked other numbers than the reference's, but ranked them by the rule
        drift = f"; {self.score_drift}; the flags are the rule applied to the logged scores" if self.score_drift else ""
        if self.n_diff() == 0 and self.next_token_ok:
            if drift:
                return f"DISAGREE: identical {self.identical_what} at every layer{drift}; {what}"
            return f"agree: identical {self.identical_what} at every layer; {what}"
        if self.selections_ok(tie_tol) and not drift:
            return f"agree up to near-ties: {self.differences(True, tie_tol)}; {what}"
        return f"DISAGREE: {self.differences(self.selections_ok(tie_tol), tie_tol)}{drift}; {what}"


def to_half(x: np.ndarray) -> np.ndarray:
    """The value the engine's F16 KV cache holds."""
    return x.astype(np.float16).astype(x.dtype)


def dense_flags(legend: dict[str, int]) -> int:
    """The DecisionLog bits of a token that ran a layer densely: attention, the FFN, its K/V cached."""
    return legend["ran_attention"] | legend["ran_ffn"] | legend["kv_cached"]


def check_log_shape(model: NumpyLlama, run: EngineRun, n: int, keys: bool = False) -> None:
    """The log holds a decision for every layer and prompt token (keys: and a key-list entry per layer)."""
    if run.flags.shape != (model.n_layer, n) or (keys and len(run.key_lists) != model.n_layer):
        lists = f" and {len(run.key_lists)} layers of key lists" if keys else ""
        raise CrosscheckError(f"the log has flags {run.flags.shape}{lists}, expected {(model.n_layer, n)}: the "
                              "engine did not run the token ids of `tokensieve tokenize`")


@dataclass
class RefLayer:
    """One layer of the reference forward, before its attention: what a check decides from."""

    index: int
    x: np.ndarray  # the layer's input h [T][E] (the forward adds to it after the check's step)
    normed: np.ndarray  # RMSNorm_attn(h) with its gain
    q: np.ndarray  # post-RoPE queries [T][n_head][d], unrounded
    k: np.ndarray  # post-RoPE keys [T][n_head_kv][d], unrounded
    v: np.ndarray
    allowed: np.ndarray  # the layer's attention mask [T][T] (causal, or a sliding window)


# What a check's step tells the forward to run at a layer: the rows that attend, their attention outputs (before
# the output projection) and the rows that run the FFN (slice(None): every row); None: the layer runs densely.
LayerRun = Optional[tuple[Union[np.ndarray, slice], np.ndarray, Union[np.ndarray, slice]]]


def reference_forward(model: NumpyLlama, ids: list[int], run: EngineRun, step: Callable[[RefLayer], LayerRun],
                      keys: bool = False) -> np.ndarray:
    """The reference's float64 forward over the prompt that goes on with the engine's decisions: per layer,
    RMSNorm_attn, RoPE'd Q/K/V and the attention mask, handed to step, which compares the layer's decisions
    and says what runs (LayerRun); a dense layer attends over half-precision K/V, the KV cache's format.
    Checks the log's shape first (keys: its key lists too). Returns the last block's output."""
    n = len(ids)
    check_log_shape(model, run, n, keys)
    x = model.embed(ids)
    for index in range(model.n_layer):
        normed = model.rms_norm(x, f"blk.{index}.attn_norm.weight")
        cos, sin = model.rope_tables(np.arange(n), index)
        q, k, v = model.qkv(index, normed, cos, sin)
        allowed = model.attention_mask(index, n)
        layer_run = step(RefLayer(index, x, normed, q, k, v, allowed))
        if layer_run is None:
            x += model.attn_output(index, model.attention(q, to_half(k), to_half(v), allowed))
            x += model.ffn(index, x)
            continue
        rows, a, ffn_rows = layer_run
        x[rows] += model.attn_output(index, a)
        x[ffn_rows] += model.ffn(index, x[ffn_rows])
    return x


def check_policy(model: NumpyLlama, model_path: str, ids: list[int], run: EngineRun, spec: str,
                 members: int | None = None, score_tol: float = DEFAULT_SCORE_TOL) -> PolicyCheck:
    """members: the KVSink check's sensitivity members (default DEFAULT_MEMBERS); other policies ignore it.
    score_tol: the largest difference between a score the log holds and the reference's, relative to the
    larger of the reference's score and the layer's cut, read as float32 rounding; a larger one is reported
    as score drift (PolicyCheck.score_drift), apart from the flags' consistency with the logged scores."""
    if ";" in spec or spec.startswith(("kvquant:", "kvsink:")):
        return check_kvsink(model, model_path, ids, run, spec, DEFAULT_MEMBERS if members is None else members)
    name, options = parse_spec(spec)
    if name == "tokenbutler":
        return check_tokenbutler(model, model_path, ids, run, spec, options)
    if name not in POLICIES:
        raise CrosscheckError(f"no reference for policy {name!r} (covered: {', '.join(POLICIES)}, "
                              "tokenbutler, kvquant;kvsink)")
    policy = POLICIES[name](options, model)
    selects = getattr(policy, "selects_tokens", False)  # else it skips attention (skip_attention)
    n = len(ids)
    result = PolicyCheck(spec, n)
    ran_attn, ran_ffn, kv_cached = (run.legend[k] for k in ("ran_attention", "ran_ffn", "kv_cached"))
    score_errors: list[tuple[int, float]] = []  # (layer, the logged scores' largest relative difference)

    def step(ref: RefLayer) -> LayerRun:
        layer = ref.index
        flags = run.flags[layer]
        engine_kept = (flags & ran_attn) != 0
        engine_ffn = (flags & ran_ffn) != 0
        engine_cached = (flags & kv_cached) != 0
        acts = layer in policy.layers
        if acts:
            d = (policy.select(layer, ref.x, ref.normed, engine_kept) if selects
                 else policy.decide(layer, ref.q, ref.k, ref.v, engine_kept))
            diff = d.kept != engine_kept
            agree = np.abs(d.margin[~diff])
            agree = agree[~np.isnan(agree)]
            explained = d.explain(diff) if diff.any() else np.zeros(0)
            note = d.note
            logged = run.scores[layer] if layer < len(run.scores) else None
            if d.scores is not None and logged is not None:
                err = compare_scores(logged, d.scores, d.cut)
                score_errors.append((layer, err))
                note += f"; logged scores within {err:.1e}"
                # The engine's flags must be its own scores ranked by the rule, exactly (float32 values),
                # however far those scores drift from the reference's.
                inconsistent = np.flatnonzero(policy.rank(logged)[0] != engine_kept)
                if len(inconsistent):
                    result.flag_errors.append(f"layer {layer}: the flags are not the rule applied to the logged "
                                              f"scores (tokens {inconsistent.tolist()[:12]})")
            result.layers.append(LayerCheck(layer, engine_kept, d.kept, explained, float(agree.min(initial=np.inf)),
                                            note))
            expected_cached = np.ones(n, dtype=bool) if policy.cache_skipped_kv else engine_kept
            if (engine_cached != expected_cached).any():
                result.flag_errors.append(f"layer {layer}: K/V cached for tokens "
                                          f"{np.flatnonzero(engine_cached != expected_cached).tolist()} "
                                          "against the policy's kv rule")
        elif not (engine_kept.all() and engine_cached.all()):
            result.flag_errors.append(f"layer {layer}: the policy does not act here, but the log is not dense")
        # A token selected out of the layer skips its FFN too; a token skipping attention only does not.
        expected_ffn = engine_kept if acts and selects else np.ones(n, dtype=bool)
        if (engine_ffn != expected_ffn).any():
            result.flag_errors.append(f"layer {layer}: FFN ran for tokens "
                                      f"{np.flatnonzero(engine_ffn != expected_ffn).tolist()} against the policy")
        # Go on with the engine's decisions: its attending rows over its cached keys, its FFN rows.
        rows = np.flatnonzero(engine_kept)
        a = model.attention(ref.q[rows], to_half(ref.k), to_half(ref.v), ref.allowed[rows] & engine_cached[None, :])
        return rows, a, np.flatnonzero(engine_ffn)

    x = reference_forward(model, ids, run, step)
    if score_errors:
        worst_layer, worst = max(score_errors, key=lambda e: e[1])
        result.scores = (f"logged scores of {len(score_errors)} layers within {worst:.1e} of the "
                         "reference's (relative to the larger of the score and the cut)")
        beyond = [layer for layer, err in score_errors if not err <= score_tol]
        if beyond:
            result.score_drift = (f"the logged scores drift from the reference's beyond --score-tol {score_tol:g} at "
                                  f"{len(beyond)} of {len(score_errors)} layers (up to {worst:.2e}, layer "
                                  f"{worst_layer})")
    result.next_token_ok, result.next_token = check_next_token(model, model_path, x, run)
    return result


def compare_scores(logged: np.ndarray, ref: np.ndarray, cut: float) -> float:
    """The largest |logged - ref| / max(|ref|, |cut|) over the positions (an infinite score must be infinite
    on both sides: else inf). The cut floors the scale, so a score near 0 (a token orthogonal to the sink),
    whose relative error float32 cancellation inflates, is judged on the scale of the decision it feeds."""
    inf_l, inf_r = np.isinf(logged), np.isinf(ref)
    if (inf_l != inf_r).any() or (np.sign(logged[inf_l]) != np.sign(ref[inf_r])).any():
        return np.inf
    fin = ~inf_r
    scale = np.maximum(np.abs(ref[fin]), abs(cut) if np.isfinite(cut) else 0.0)
    scale = np.where(scale > 0, scale, 1.0)
    return float((np.abs(logged[fin] - ref[fin]) / scale).max(initial=0.0))


def check_next_token(model: NumpyLlama, model_path: str, x: np.ndarray, run: EngineRun) -> tuple[bool, str]:
    """The reference's greedy token after the prompt (x: the last block's output) against the engine's."""
    logits = model.output_logits(x[-1:])[0]
    best, second = np.argsort(logits)[::-1][:2]
    ref_text = token_bytes(model_path, int(best))
    ok = ref_text == run.new_text
    return ok, (f"next token {'=' if ok else '!='} engine's "
                f"({ref_text!r} vs {run.new_text!r}, top-2 logit gap {logits[best] - logits[second]:.3f})")


# --------------------------------------------------------------------------------------------------
# TokenButler: the keys each (position, query head) attends


KEY_POLICIES = ("tokenbutler",)  # their runs log the key lists (--decision-log-keys)
I16_QUERY_MAX = 8191  # keys=i8: the query's integers (kernels/simd_ops.h kQueryI16Max)
# A stored value this close (times its vector's largest |value|) to a rounding midpoint can round either way in the
# engine: a float32 forward of the predictor differs from the float64 one by up to 3.4e-7 of that scale (SmolLM2).
ROUND_TOL = 2.0 ** -18


def half_steps(x: np.ndarray, half: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """|the other half-precision rounding - x's| where x lies within tol of the midpoint between them, else 0."""
    rounded = half.astype(np.float64)
    steps = np.zeros_like(x)
    for toward in (-np.inf, np.inf):
        other = np.nextafter(half, np.float16(toward)).astype(np.float64)
        steps = np.where(np.abs(x - (rounded + other) / 2) < tol, np.abs(other - rounded), steps)
    return np.nan_to_num(steps, posinf=0.0)


def rint_steps(u: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """rint(u) and a step of 1 where u lies within ROUND_TOL * scale of a midpoint between integers, else 0."""
    return np.rint(u), (np.abs(np.abs(u - np.floor(u)) - 0.5) < ROUND_TOL * scale).astype(np.float64)


class TokenButlerReference:
    """TokenButler (paper 001; src/policies/tokenbutler/tokenbutler.h, src/policies/key_budget.h): the predictor
    (tools/numpy_butler.py) reads layer 0's RMSNorm_attn output of the prompt; at every layer l >= first_layer
    (default 1; the layers before run dense) query head h at position t scores each candidate key j (j <= t,
    inside the layer's window) by q_imp[t, (l, h)] . k_imp[j, (l, h)] (the 1/sqrt(d) ranks alike), with
    shared=1 by the sum of that over its KV head's query heads (one list for the group); it attends to the
    budget(t) = min(t + 1, ceil((t + 1) * keep)) best (ties to the earlier position), every candidate below
    `sinks` (default 4) besides, and with recent=N the last N positions. The engine scores against importance
    keys it stores rounded, so the reference rounds them alike: to half precision (keys=f16, the default;
    the queries stay unrounded, float32 in the engine), or keys=i8: per position over the KV head's group *
    d values, code = rint(k * 127 / max|k|) times max|k| / 127, and the query rounded to integers of at most
    I16_QUERY_MAX over its scored width (kernels/simd_ops.h round_query_i16)."""

    def __init__(self, options: dict[str, str], model: NumpyLlama):
        reject_unknown(options, {"keep", "predictor", "recent", "shared", "keys", "sinks", "first_layer"},
                       "tokenbutler")
        if "keep" not in options or "predictor" not in options:
            raise CrosscheckError("tokenbutler needs keep=F and predictor=FILE")
        self.shared = choice(options, "shared", ("0", "1"), "tokenbutler") == "1"
        self.int8 = choice(options, "keys", ("f16", "i8"), "tokenbutler") == "i8"
        self.keep = number(options, "keep", None, "tokenbutler")
        self.sinks = number(options, "sinks", 4, "tokenbutler", int)
        self.recent = number(options, "recent", 0, "tokenbutler", int)
        first = number(options, "first_layer", 1, "tokenbutler", int)
        path = options["predictor"]
        try:
            self.butler = NumpyButler(path)
        except OSError as e:
            raise CrosscheckError(f"tokenbutler predictor {path}: {os_reason(e)}") from None
        except ValueError as e:  # not a well-formed predictor file (numpy_butler.load_butler says how)
            raise CrosscheckError(f"tokenbutler predictor {e}") from None
        c = self.butler.config
        if (c.n_embd, c.n_layers, c.n_query_heads) != (model.n_embd, model.n_layer, model.n_head):
            raise CrosscheckError(f"predictor {path} is for E={c.n_embd}, {c.n_layers} layers, {c.n_query_heads} "
                                  "heads, not this model")
        if not (0 < self.keep <= 1 and c.first_layer <= first < model.n_layer):
            raise CrosscheckError(f"tokenbutler keep={self.keep} or first_layer={first} out of range")
        self.layers = set(range(first, model.n_layer))
        self.n_head, self.n_head_kv = model.n_head, model.n_head_kv
        self.q_imp = self.k_imp = np.zeros(0)

    def predict(self, normed0: np.ndarray) -> None:
        """The importance queries and keys of the prompt, from layer 0's RMSNorm_attn output."""
        self.q_imp, self.k_imp = self.butler.forward(normed0)

    def budget(self, pos: np.ndarray) -> np.ndarray:
        return np.minimum(pos + 1, np.ceil((pos + 1) * self.keep)).astype(np.int64)

    def stored(self, layer: int, rounded: bool = True) -> tuple[np.ndarray, ...]:
        """The importance queries and keys as the engine scores them at `layer`, [T][scored group][width] (width:
        a query head's d, or with shared=1 its KV head's group's concatenated), and how far float32 can move
        each value across a rounding midpoint (0: not within ROUND_TOL of one; else the step to the other
        rounding). rounded=False: the unrounded values, no steps."""
        d = self.butler.config.imp_dim
        slots = [self.butler.slot(layer, h) for h in range(self.n_head)]
        q, k = self.q_imp[:, slots], self.k_imp[:, slots]  # [T][head][d]
        n, width = q.shape[0], self.n_head // self.n_head_kv if self.shared else 1
        q_step, k_step = np.zeros_like(q), np.zeros_like(k)
        if self.int8 and rounded:
            group = k.reshape(n, self.n_head_kv, -1)  # a position's codes share its KV head's group's scale
            amax = np.abs(group).max(axis=-1, keepdims=True)
            codes, k_step = rint_steps(group * np.where(amax > 0, 127 / np.where(amax > 0, amax, 1), 0), 127)
            k, k_step = codes * (amax / 127), k_step * (amax / 127)
            q = q.reshape(n, self.n_head // width, width * d)
            q_amax = np.abs(q).max(axis=-1, keepdims=True)
            q_amax = np.where(q_amax < 1e-30, 0, q_amax)
            codes, q_step = rint_steps(q * np.where(q_amax > 0, I16_QUERY_MAX / np.where(q_amax > 0, q_amax, 1), 0),
                                       I16_QUERY_MAX)
            q, q_step = codes * (q_amax / I16_QUERY_MAX), q_step * (q_amax / I16_QUERY_MAX)
        elif rounded:
            half = k.astype(np.float16)
            with np.errstate(invalid="ignore"):
                k_step = half_steps(k, half, ROUND_TOL * np.abs(k).max(axis=-1, keepdims=True))
            k = half.astype(np.float64)
        shape = (n, self.n_head // width, width * d)
        return tuple(a.reshape(shape) for a in (q, k, q_step, k_step)) + (width,)

    def scores(self, layer: int, rounded: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """[query head][query position][key position]: the ranked scores (rounded: of the values as stored),
        and the most that rounding ambiguity in the engine's float32 can change each."""
        q, k, q_step, k_step, width = self.stored(layer, rounded)
        s = np.einsum("tgx,sgx->gts", q, k)
        reach = np.einsum("tgx,sgx->gts", np.abs(q), k_step) + np.einsum("tgx,sgx->gts", q_step, np.abs(k))
        return np.repeat(s, width, axis=0), np.repeat(reach, width, axis=0)

    def select(self, layer: int, allowed: np.ndarray, rounded: bool = True
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """allowed[t, j]: key j is a candidate of position t. Returns the selection [head][t][j]; each key's
        signed distance from the cut midway between the budget-th and next best score of its row, relative to
        the row's score spread (max - min over its candidates; positive: selected), NaN where no score decides
        (a sink, a recent key, a row whose budget covers every candidate, not a candidate); decided[t, j]; and
        the margin's reach: how far rounding ambiguity can move the key's score relative to the cut (its own
        reach plus the row's largest, which bounds the cut's move), in the same unit."""
        s, reach = self.scores(layer, rounded)
        n = s.shape[1]
        pos = np.arange(n)
        masked = np.where(allowed[None], s, -np.inf)
        order = np.argsort(-masked, axis=-1, kind="stable")  # best first, ties to the earlier position
        rank = np.argsort(order, axis=-1)
        k = self.budget(pos)
        forced = allowed & ((pos[None, :] < self.sinks) | (pos[None, :] + self.recent > pos[:, None]))
        selected = ((rank < k[None, :, None]) & allowed[None]) | forced[None]
        has_cut = k < allowed.sum(axis=1)
        ranked = np.take_along_axis(masked, order, axis=-1)
        cut = (ranked[:, pos, k - 1] + ranked[:, pos, np.minimum(k, n - 1)]) / 2  # [head][t]
        spread = masked.max(axis=-1) - np.where(allowed[None], s, np.inf).min(axis=-1)
        spread = np.where(spread > 0, spread, 1)[..., None]
        decided = allowed & ~forced & has_cut[:, None]
        margin = (s - cut[..., None]) / spread
        reach = (reach + np.where(allowed[None], reach, 0).max(axis=-1, keepdims=True)) / spread
        return selected, np.where(decided[None], margin, np.nan), decided, reach


@dataclass
class KeyLayerCheck(LayerCheck):
    """One TokenButler layer: engine_kept / ref_kept are the key decisions (query head, position, candidate)
    flattened; a list is one (position, query head)'s keys."""

    n_lists: int = 0
    identical: int = 0
    n_keys: int = 0  # keys the engine's lists hold
    unrounded: int = 0  # lists a reference without the importance keys' rounding would find different
    plain: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the differing keys' margins, before reach

    def describe(self) -> str:
        return (f"layer {self.layer:2d}: {self.identical}/{self.n_lists} lists identical, engine {self.n_keys} keys, "
                f"reference {int(self.ref_kept.sum())}; closest agreeing margin {self.closest:.2e}; {self.note}")


@dataclass
class TokenButlerCheck(PolicyCheck):
    rounding: str = ""  # what modelling the stored keys' rounding changes

    identical_what = "key lists"

    def summary(self) -> str:
        lists = sum(c.n_lists for c in self.layers)
        identical = sum(c.identical for c in self.layers)
        closest = min(c.closest for c in self.layers)
        return (f"{self.spec}: {lists} key lists (position, query head) over {len(self.layers)} layers "
                f"({self.n_tokens} tokens), {identical} identical; {self.n_decisions()} key decisions, "
                f"{sum(c.n_keys for c in self.layers)} keys attended; closest agreeing margin {closest:.2e} of "
                f"the score spread; " + (f"{self.rounding}; " if self.rounding else "") + self.next_token)

    def differences(self, near_ties: bool, tie_tol: float) -> str:
        differ_lists = sum(c.n_lists - c.identical for c in self.layers)
        plain = max((float(c.plain.max()) for c in self.layers if len(c.plain)), default=0.0)
        return (f"{self.n_diff()} key decisions in {differ_lists} lists differ, margins up to {plain:.2e}, "
                f"net of rounding reach up to {self.worst():.2e}" + (f" < {tie_tol:g}" if near_ties else ""))


def listed_attention(model: NumpyLlama, q: np.ndarray, k: np.ndarray, v: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Attention of every query over its own keys, keys[head][t][j] (no key: output 0), [T][n_head * d]."""
    kv_of = np.arange(model.n_head) // (model.n_head // model.n_head_kv)
    s = np.einsum("thd,shd->hts", q, k[:, kv_of]) / np.sqrt(model.head_dim)
    s = np.where(keys, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(top), top, 0))
    total = p.sum(axis=-1, keepdims=True)
    p /= np.where(total > 0, total, 1)
    return np.einsum("hts,shd->thd", p, v[:, kv_of]).reshape(q.shape[0], model.n_head * model.head_dim)


def check_tokenbutler(model: NumpyLlama, model_path: str, ids: list[int], run: EngineRun, spec: str,
                      options: dict[str, str]) -> TokenButlerCheck:
    """The reference's key lists (TokenButlerReference) against the engine's at every layer >= first_layer;
    the forward then goes on with the engine's lists (every query over exactly its logged keys, half-precision
    K/V), so that a near-tie cannot cascade. Every token must run attention and the FFN and cache its K/V."""
    policy = TokenButlerReference(options, model)
    n = len(ids)
    result = TokenButlerCheck(spec, n)
    dense = dense_flags(run.legend)
    if ((run.flags & dense) != dense).any():
        result.flag_errors.append("some token skipped attention or the FFN, or dropped its K/V")
    unrounded = 0

    def step(ref: RefLayer) -> LayerRun:
        nonlocal unrounded
        layer = ref.index
        if layer == 0:
            policy.predict(ref.normed)
        engine = run.key_lists[layer]
        if layer not in policy.layers:
            if engine is not None:
                result.flag_errors.append(f"layer {layer}: keys were selected where the policy keeps the layer dense")
            return None
        if engine is None or engine.shape != (model.n_head, n, n):
            raise CrosscheckError(f"the log lists no keys (or not every head's) at layer {layer}")
        allowed = ref.allowed
        ref_keys, margin, decided, reach = policy.select(layer, allowed)
        diff = ref_keys != engine
        plain = np.where(decided[None], np.abs(margin), np.inf)  # no score decides a forced key: never a near-tie
        net = np.maximum(plain - reach, 0)
        same_list = ~diff.any(axis=-1)
        note = "lists identical"
        if diff.any():
            h, t, j = (int(i) for i in np.unravel_index(np.argmax(np.where(diff, plain, -1)), diff.shape))
            note = (f"{int(diff.sum())} keys differ in {int((~same_list).sum())} lists; the largest margin "
                    f"{plain[h, t, j]:.2e} (rounding reach {reach[h, t, j]:.2e}) at position {t}, head {h}, key {j}, "
                    f"which the engine {'has' if engine[h, t, j] else 'lacks'}; the largest net of reach "
                    f"{net[diff].max():.2e}")
        check = KeyLayerCheck(layer, engine[:, allowed].ravel(), ref_keys[:, allowed].ravel(), net[diff],
                              float(plain[~diff & decided[None]].min(initial=np.inf)), note, n_lists=same_list.size,
                              identical=int(same_list.sum()), n_keys=int(engine.sum()), plain=plain[diff])
        if not policy.int8:
            check.unrounded = int((policy.select(layer, allowed, rounded=False)[0] != engine).any(axis=-1).sum())
            unrounded += check.unrounded
        result.layers.append(check)
        every = slice(None)
        return every, listed_attention(model, ref.q, to_half(ref.k), to_half(ref.v), engine), every

    x = reference_forward(model, ids, run, step, keys=True)
    if not policy.int8:
        result.rounding = (f"importance keys rounded to half precision as the engine stores them (unrounded, "
                           f"{unrounded} lists would differ from the engine's)")
    else:
        result.rounding = "importance keys and queries rounded as keys=i8 stores and scores them"
    result.next_token_ok, result.next_token = check_next_token(model, model_path, x, run)
    return result


# --------------------------------------------------------------------------------------------------
# KVSink under a quantized KV cache: which prompt tokens keep full-precision K/V


PREFILL_BATCH = 512  # runtime/transformer.cpp kMaxBatch: a longer prompt runs in several passes
Q8_BLOCK = 32  # kernels/kv_codes.h kQueryBlock: queries are rounded to 8 bits per 32 channels


@dataclass
class KvQuantFormat:
    """kvquant's cache (src/policies/kvquant/kvquant.h, src/runtime/kv_cache.h), dynamic ranges:
    asymmetric round-to-nearest codes x ~ scale * code + min, scale = (max - min) / (2^bits - 1),
    code = clamp(rint((x - min) / scale)) (ties to even; a constant group: scale 0, code 0).
    Values per token in groups of `group` channels of the K/V row (from the float V); keys the same
    (mode=token, from the float K) or, mode=kivi, per channel over blocks of `group` tokens, from the
    half-precision K, the block's full-precision tokens left out of its ranges. Keys of 4 or 2 bits
    are scored against the query rounded to 8 bits per 32 channels (llama.cpp's q8_0): per-token
    keys  sum_c q8(q/sqrt(d))[c] * scale_g * code[c] + min_g * sum_c q[c]/sqrt(d);
    KIVI keys sum_c q8(q/sqrt(d) * scale[c])[c] * code[c] + sum_c q[c]/sqrt(d) * min[c]
    (kv_codes.h coded_key_score, kv_attention.cpp attend_coded); 8-bit keys: q . the decoded key.
    Which rows of a one-pass prompt attention reads as codes (KvCache::begin_batch): prefill=full
    none (every key and value as just computed, in half precision: the F16 engine's attention);
    prefill=quantized the positions below min(keys coded, n - residual), keys coded = n (token) or
    the whole KIVI blocks, n // group * group; the other rows, and full-precision tokens, in half
    precision."""

    bits: int
    group: int
    kivi: bool
    residual: int
    quantized_prefill: bool

    @classmethod
    def from_options(cls, options: dict[str, str]) -> "KvQuantFormat":
        reject_unknown(options, {"bits", "group", "mode", "residual", "prefill", "ranges"}, "kvquant")
        if options.get("ranges", "dynamic") != "dynamic":
            raise CrosscheckError("kvquant's static ranges are not covered (ranges=dynamic only)")
        if options.get("bits") not in ("8", "4", "2"):
            raise CrosscheckError("kvquant needs bits=8|4|2")
        group = number(options, "group", 128, "kvquant", int)
        if group <= 0:
            raise CrosscheckError(f"kvquant group={group} is not positive")
        return cls(int(options["bits"]), group, choice(options, "mode", ("token", "kivi"), "kvquant") == "kivi",
                   number(options, "residual", 0, "kvquant", int),
                   choice(options, "prefill", ("full", "quantized"), "kvquant") == "quantized")

    def coded_below(self, n: int) -> int:
        """Positions below this are read as codes by a one-pass prompt's attention (unless pinned)."""
        if not self.quantized_prefill:
            return 0
        keys_coded = n // self.group * self.group if self.kivi else n
        return min(keys_coded, n - min(n, self.residual))

    def rtn(self, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Codes of x in the ranges [lo, hi] (broadcast) and the ranges' scales."""
        scale = (hi - lo) / (2 ** self.bits - 1)
        safe = np.where(scale > 0, scale, 1.0)
        codes = np.where(scale > 0, np.clip(np.rint((x - lo) / safe), 0, 2 ** self.bits - 1), 0.0)
        return codes, scale

    def token_groups(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-token group coding of rows x [T][kv_dim]: codes, and each channel's scale and min."""
        t, dim = x.shape
        group_of = np.arange(dim) // self.group
        n_groups = group_of[-1] + 1
        lo, hi = np.empty((t, n_groups)), np.empty((t, n_groups))
        for g in range(n_groups):
            lo[:, g], hi[:, g] = x[:, group_of == g].min(axis=1), x[:, group_of == g].max(axis=1)
        codes, scale = self.rtn(x, lo[:, group_of], hi[:, group_of])
        return codes, scale, lo[:, group_of]


def round_q8(x: np.ndarray) -> np.ndarray:
    """x [..][d] rounded as quantize_q8: per block of 32 channels (zero padded), d = max|x| / 127,
    x ~ d * rint(x / d) (ties to even)."""
    d = x.shape[-1]
    padded = -(-d // Q8_BLOCK) * Q8_BLOCK
    xb = np.concatenate((x, np.zeros(x.shape[:-1] + (padded - d,))), axis=-1)
    xb = xb.reshape(x.shape[:-1] + (padded // Q8_BLOCK, Q8_BLOCK))
    amax = np.abs(xb).max(axis=-1, keepdims=True)
    inv = np.where(amax > 0, 127.0 / np.where(amax > 0, amax, 1.0), 0.0)
    return (np.rint(xb * inv) * (amax / 127.0)).reshape(x.shape[:-1] + (padded,))[..., :d]


def quantized_attention(model: NumpyLlama, fmt: KvQuantFormat, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                        full: np.ndarray) -> np.ndarray:
    """Causal attention of a one-pass prompt over a kvquant cache (KvQuantFormat); full[t]: token t's
    K/V kept in half precision at this layer (KvStorage::Full). [T][n_head * d] as model.attention."""
    n, n_kv, d = k.shape
    kv_of = np.arange(model.n_head) // (model.n_head // n_kv)
    qs = q / np.sqrt(d)  # the engine scales queries before rounding them
    k_half, v_half = to_half(k), to_half(v)
    scores = np.einsum("thd,shd->hts", qs, k_half[:, kv_of])  # half-precision rows
    values = v_half.copy()
    coded = (np.arange(n) < fmt.coded_below(n)) & ~full
    if coded.any():
        rows = np.flatnonzero(coded)
        codes, scale, lo = fmt.token_groups(v[rows].reshape(len(rows), n_kv * d))
        values[rows] = (scale * codes + lo).reshape(len(rows), n_kv, d)
        rounded = fmt.bits <= 4
        if fmt.kivi:
            for block in np.unique(rows // fmt.group):
                in_block = np.arange(block * fmt.group, (block + 1) * fmt.group)
                ranged = in_block[~full[in_block]]  # the block's coded tokens set its ranges
                kb = k_half[ranged].reshape(len(ranged), n_kv * d)
                lo_c, hi_c = kb.min(axis=0), kb.max(axis=0)
                read = rows[rows // fmt.group == block]
                codes_k, scale_c = fmt.rtn(k_half[read].reshape(len(read), n_kv * d), lo_c, hi_c)
                codes_k = codes_k.reshape(len(read), n_kv, d)
                scale_c, lo_c = scale_c.reshape(n_kv, d)[kv_of], lo_c.reshape(n_kv, d)[kv_of]  # [head][d]
                qk = qs * scale_c
                qk = round_q8(qk) if rounded else qk
                scores[:, :, read] = (np.einsum("thd,shd->hts", qk, codes_k[:, kv_of])
                                      + np.einsum("thd,hd->ht", qs, lo_c)[:, :, None])
        else:
            codes_k, scale_k, lo_k = fmt.token_groups(k[rows].reshape(len(rows), n_kv * d))
            shape = (len(rows), n_kv, d)
            kd = (scale_k * codes_k).reshape(shape)[:, kv_of]
            qr = round_q8(qs) if rounded else qs
            scores[:, :, rows] = (np.einsum("thd,shd->hts", qr, kd)
                                  + np.einsum("thd,shd->hts", qs, lo_k.reshape(shape)[:, kv_of]))
    scores = np.where(causal_mask(n)[None], scores, -np.inf)
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    return np.einsum("hts,shd->thd", probs, values[:, kv_of]).reshape(n, model.n_head * d)


@dataclass
class KvSinkCheck(PolicyCheck):
    """KVSink's pinned tokens: the reference's top k of |h[:, channel]| after block `layer` against the
    tokens the engine's log flags kv_full_precision, at each layer after `layer` (self.layers).
    When the prompt's attention reads codes, `members` more reference forwards with Q/K/V perturbed
    at float32's rounding level (F32_NOISE) measure how far that noise moves each token's margin: a
    low-bit forward can amplify a last-bit difference (one code rounded the other way) into a
    different top k, and then the engine's float32 run is one more draw of the same noise."""

    layer: int = 0
    channel: int = 0
    k: int = 0
    mode: str = ""
    ref_sinks: list[int] = field(default_factory=list)
    engine_sinks: list[int] = field(default_factory=list)  # at the first pinned layer
    kth: str = ""  # the reference's k-th and (k+1)-th |h| and their gap
    gap: float = np.inf  # (k-th - (k+1)-th) / k-th
    members: int = 0
    member_sinks: list[list[int]] = field(default_factory=list)
    # Tokens whose decision float32-level noise can flip: some member decides them otherwise, or their
    # margin is within NOISE_Z times the RMS change of their margin over the members.
    unsettled: list[int] = field(default_factory=list)
    spread: float = 0.0  # median over members and the 2k tokens nearest the cut of |h|'s relative change
    member_next: str = ""  # how the members' greedy tokens relate to the engine's
    member_next_ok: bool = False  # a member's greedy token is the engine's, or within the noise of it

    def differ(self) -> list[int]:
        return sorted(set(self.ref_sinks) ^ set(self.engine_sinks))

    def within_sensitivity(self) -> bool:
        """Every difference is a decision float32-level noise can flip, and the engine's next token is the
        reference's or within that noise of it."""
        return (bool(self.members) and set(self.differ()) <= set(self.unsettled)
                and (self.next_token_ok or self.member_next_ok))

    def ok(self, tie_tol: float) -> bool:
        return not self.flag_errors and (super().ok(tie_tol) or self.within_sensitivity())

    def ensemble(self) -> str:
        if not self.members:
            return "no codes read before the decision (no noise members)"
        same = sum(s == self.ref_sinks for s in self.member_sinks)
        shown = ", ".join(map(str, self.unsettled[:12])) + (", ..." if len(self.unsettled) > 12 else "")
        return (f"{self.members} float32-noise members: {same} pick the reference's set, |h| near the cut moves "
                f"by {self.spread:.1e} (median); decisions it flips or moves within {NOISE_Z:g} RMS of flipping: "
                f"{len(self.unsettled)} [{shown}]"
                + (f"; {self.member_next}" if self.member_next else ""))

    def verdict(self, tie_tol: float) -> str:
        last = self.layer + len(self.layers)
        what = (f"{self.spec}: {self.n_tokens} tokens, |h[:, {self.channel}]| after block {self.layer} "
                f"({self.mode}): {self.kth}; pinned at layers {self.layer + 1}-{last}; {self.ensemble()}; "
                f"{self.next_token}")
        if self.flag_errors:
            return f"DISAGREE {what}; log inconsistent with the policy: {self.flag_errors[0]}"
        if not self.differ() and self.next_token_ok:
            return f"agree: the engine pins the reference's {len(self.ref_sinks)} tokens {self.ref_sinks}; {what}"
        pins = f"engine pins {self.engine_sinks}, reference {self.ref_sinks} (differ at {self.differ()}"
        if super().ok(tie_tol):
            return f"agree up to near-ties: {pins}, margins below {self.worst():.2e} < {tie_tol:g}); {what}"
        if self.within_sensitivity():
            return (f"agree within float32 sensitivity: {pins}, margins up to {self.worst():.2e}, every one a "
                    f"decision float32-level noise flips); {what}")
        return f"DISAGREE: {pins}, largest margin {self.worst():.2e}); {what}"


def kvsink_options(options: dict[str, str]) -> tuple[int, int, int]:
    """k, the emergence layer and the channel of a kvsink spec (profile=FILE or layer=L,channel=C)."""
    reject_unknown(options, {"k", "profile", "layer", "channel"}, "kvsink")
    k = number(options, "k", 5, "kvsink", int)
    if k < 0:
        raise CrosscheckError(f"kvsink k={k} is negative")
    if "profile" in options:
        path = options["profile"]
        profile = read_profile(path, "kvsink")
        try:
            return k, int(profile["emergence_layer"]), int(profile["channel"])
        except KeyError as e:
            raise CrosscheckError(f"kvsink profile {path} has no {e.args[0]!r}") from None
        except (TypeError, ValueError):
            raise CrosscheckError(f"kvsink profile {path}: emergence_layer and channel are not integers") from None
    if "layer" not in options or "channel" not in options:
        raise CrosscheckError("kvsink needs profile=FILE or both layer=L and channel=C")
    return k, number(options, "layer", None, "kvsink", int), number(options, "channel", None, "kvsink", int)


F32_NOISE = 2.0 ** -23  # relative perturbation of a sensitivity member's Q/K/V: one float32 ulp
DEFAULT_MEMBERS = 8
NOISE_Z = 3.0  # a margin within this many RMS noise changes of itself can flip


def top_k(a: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest values, largest first, ties to the earlier position (KvSink's sort)."""
    return np.lexsort((np.arange(len(a)), -a))[:k]


def cut_margins(a: np.ndarray, k: int) -> np.ndarray:
    """Each token's signed relative distance from the top-k cut of a (midway between the k-th and
    (k+1)-th values): positive inside. No cut (k = 0 or k >= n): +-inf."""
    order = top_k(a, len(a))
    kept = np.zeros(len(a), dtype=bool)
    kept[order[:k]] = True
    if not 0 < k < len(a):
        return np.where(kept, np.inf, -np.inf)
    cut = (a[order[k - 1]] + a[order[k]]) / 2
    return (a - cut) / cut if cut > 0 else np.where(kept, np.inf, -np.inf)


def kvsink_forward(model: NumpyLlama, fmt: KvQuantFormat, ids: list[int], sink_layer: int, channel: int,
                   pins: np.ndarray, noise_seed: int | None = None, whole: bool = True
                   ) -> tuple[np.ndarray, np.ndarray | None]:
    """|h[:, channel]| after block sink_layer and (whole) the last block's output of the prompt's forward
    over the kvquant cache, pins[layer][t]: token t's K/V kept in half precision. With noise_seed, Q/K/V
    are multiplied by 1 + F32_NOISE * N(0, 1) at every layer (a sensitivity member)."""
    n = len(ids)
    rng = None if noise_seed is None else np.random.default_rng(noise_seed)
    x = model.embed(ids)
    cos, sin = model.rope_tables(np.arange(n))
    a = np.zeros(n)
    for layer in range(model.n_layer):
        if layer == sink_layer + 1:  # x: block sink_layer's output, what observe_layer_input reads
            a = np.abs(x[:, channel])
            if not whole:
                return a, None
        q, k, v = model.qkv(layer, model.rms_norm(x, f"blk.{layer}.attn_norm.weight"), cos, sin)
        if rng is not None:
            q, k, v = (y * (1 + F32_NOISE * rng.standard_normal(y.shape)) for y in (q, k, v))
        x = x + model.attn_output(layer, quantized_attention(model, fmt, q, k, v, pins[layer]))
        x = x + model.ffn(layer, x)
    return a, x


def check_kvsink(model: NumpyLlama, model_path: str, ids: list[int], run: EngineRun, spec: str,
                 members: int = DEFAULT_MEMBERS) -> KvSinkCheck:
    """KVSink (paper 002; src/policies/kvquant/sink_preservation.h) with kvquant, e.g.
    "kvquant:bits=2,mode=kivi,prefill=quantized;kvsink:k=5,layer=L,channel=C". The engine observes the
    residual stream h entering block L + 1 (block L's output, before any norm) during the prompt,
    keeps the k tokens of largest |h[:, C]| (ties to the earlier position) and writes their K/V as
    KvStorage::Full in layers L + 1 .. last only; layers 0 .. L code every token. So under
    prefill=quantized h after block L has gone through attention over quantized K/V in blocks 0 .. L
    (the paper's Algorithm 1 detects on the fake-quantized forward too); under prefill=full through
    half-precision K/V only. The reference runs that forward (quantized_attention), takes the top k,
    then goes on with the engine's pins to the next token."""
    parts = [parse_spec(part) for part in spec.split(";")]
    if sorted(name for name, _ in parts) != ["kvquant", "kvsink"]:
        raise CrosscheckError(f"{spec!r}: the KVSink check takes one kvquant and one kvsink spec, joined by ';'")
    fmt = KvQuantFormat.from_options(dict(parts)["kvquant"])
    k, sink_layer, channel = kvsink_options(dict(parts)["kvsink"])
    n = len(ids)
    if not 0 <= sink_layer < model.n_layer - 1 or not 0 <= channel < model.n_embd:
        raise CrosscheckError(f"kvsink layer {sink_layer} / channel {channel} outside the model")
    if n > PREFILL_BATCH:
        raise CrosscheckError(f"{n} prompt tokens run in several passes (running top-k); keep to {PREFILL_BATCH}")
    check_log_shape(model, run, n)
    coded = fmt.coded_below(n)
    mode = (f"INT{fmt.bits} {'KIVI' if fmt.kivi else 'per-token'} group {fmt.group}, "
            + (f"prefill=quantized: codes read below position {coded}" if fmt.quantized_prefill
               else "prefill=full: the prompt's attention reads half-precision K/V"))
    result = KvSinkCheck(spec, n, layer=sink_layer, channel=channel, k=k, mode=mode)
    legend = run.legend
    dense = dense_flags(legend)
    pins = (run.flags & legend["kv_full_precision"]) != 0
    if ((run.flags & dense) != dense).any() or (run.flags & legend["kv_low_precision"]).any():
        result.flag_errors.append("some token skipped a step, dropped its K/V or was coded at low precision")
    early = np.flatnonzero(pins[: sink_layer + 1].any(axis=1))
    if len(early):
        result.flag_errors.append(f"full-precision K/V at layers {early.tolist()}, at or before block {sink_layer}")
    if (pins[sink_layer + 1:] != pins[sink_layer + 1]).any():
        result.flag_errors.append("the pinned tokens differ between the layers after the emergence layer")
    result.engine_sinks = np.flatnonzero(pins[sink_layer + 1]).tolist()

    # Go on with the engine's pins (none up to block sink_layer) after the decision.
    a, x = kvsink_forward(model, fmt, ids, sink_layer, channel, pins)
    order = top_k(a, n)
    kept = np.zeros(n, dtype=bool)
    kept[order[:k]] = True
    margin = cut_margins(a, k)
    result.ref_sinks = sorted(order[:k].tolist())
    if 0 < k < n:
        hi, lo = a[order[k - 1]], a[order[k]]
        result.gap = (hi - lo) / hi if hi > 0 else 0.0
        result.kth = (f"#{k} {hi:.6g} (token {order[k - 1]}) vs #{k + 1} {lo:.6g} (token {order[k]}), relative "
                      f"gap {result.gap:.2e}; #1 {a[order[0]]:.6g} (token {order[0]})")
    else:
        result.kth = f"k = {k} of {n} tokens: no cut"
    for layer in range(sink_layer + 1, model.n_layer):
        diff = kept != pins[layer]
        result.layers.append(LayerCheck(layer, pins[layer], kept.copy(), np.abs(margin[diff]),
                                        float(np.abs(margin[~diff]).min(initial=np.inf)),
                                        f"pinned {np.flatnonzero(pins[layer]).tolist()}"))
    result.next_token_ok, result.next_token = check_next_token(model, model_path, x, run)
    if coded and members and 0 < k < n:
        kvsink_members(result, model, model_path, fmt, ids, pins, run, a, margin, x, members)
    return result


def kvsink_members(result: KvSinkCheck, model: NumpyLlama, model_path: str, fmt: KvQuantFormat, ids: list[int],
                   pins: np.ndarray, run: EngineRun, a: np.ndarray, margin: np.ndarray, x: np.ndarray,
                   members: int) -> None:
    """The sensitivity members of check_kvsink: the decision's forward again with float32-level noise on
    Q/K/V, and the whole forward when the next token differs from the engine's."""
    k, n = result.k, len(ids)
    order = top_k(a, n)
    near = order[max(0, k - min(k, n - k)): k + min(k, n - k)]  # the 2k tokens around the cut
    whole = not result.next_token_ok
    texts = vocab_texts(model_path)
    logits = model.output_logits(x[-1:])[0]
    engine_ids = [i for i, t in enumerate(texts) if t == run.new_text]
    engine_id = max(engine_ids, key=lambda i: logits[i]) if engine_ids else None
    margins, changes, deficits = [], [], []
    for seed in range(1, members + 1):
        a_m, x_m = kvsink_forward(model, fmt, ids, result.layer, result.channel, pins, seed, whole)
        result.member_sinks.append(sorted(top_k(a_m, k).tolist()))
        margins.append(cut_margins(a_m, k))
        changes.append(np.abs(a_m[near] - a[near]) / np.maximum(a[near], 1e-30))
        if x_m is not None and engine_id is not None:
            lm = model.output_logits(x_m[-1:])[0]
            deficits.append(lm.max() - lm[engine_id])  # 0: the member's greedy token is the engine's
    result.members = members
    result.spread = float(np.median(np.concatenate(changes)))
    m = np.array(margins)
    kept = margin > 0
    flipped = ((m > 0) != kept).any(axis=0)
    rms = np.sqrt(np.mean((m - margin) ** 2, axis=0))
    result.unsettled = np.flatnonzero(flipped | (np.abs(margin) <= NOISE_Z * rms)).tolist()
    if deficits:
        d0 = logits.max() - logits[engine_id]
        rms_d = float(np.sqrt(np.mean((np.array(deficits) - d0) ** 2)))
        hits = sum(d == 0 for d in deficits)
        result.member_next_ok = hits > 0 or d0 <= NOISE_Z * rms_d
        result.member_next = (f"the engine's next token is the greedy one of {hits} of {members} members; the "
                              f"reference's logit for it is {d0:.3f} below its best, noise RMS {rms_d:.3f}")
    elif whole:
        result.member_next = "the engine's next token is no single token of the vocabulary"


def crosscheck(binary: pathlib.Path, model_path: str, prompt: str, specs: list[str],
               exact: bool = True, members: int | None = None,
               score_tol: float = DEFAULT_SCORE_TOL) -> list[PolicyCheck]:
    ids = tokenize(binary, model_path, prompt)
    try:
        model = NumpyLlama(load_raw_tensors(model_path), read_metadata(model_path), np.float64)
    except OSError as e:
        raise CrosscheckError(f"{model_path}: {os_reason(e)}") from None
    except (ValueError, KeyError, NotImplementedError, AssertionError) as e:  # a GGUF the reference cannot run
        raise CrosscheckError(f"{model_path}: the NumPy reference cannot load it ({type(e).__name__}: {e})") from None
    return [check_policy(model, model_path, ids, run_engine(binary, model_path, prompt, spec, exact), spec, members,
                         score_tol)
            for spec in specs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True, help="GGUF model file")
    ap.add_argument("-p", "--prompt", help="prompt text (default: the first paragraph of --text, cut at --chars)")
    ap.add_argument("--text", type=pathlib.Path, default=DEFAULT_TEXT, help="WikiText-2 file of the default prompt")
    ap.add_argument("--chars", type=int, default=600, help="length of the default prompt in characters")
    ap.add_argument("--policy", action="append", help=f"policy spec, repeatable (default: {DEFAULT_POLICIES})")
    ap.add_argument("--bin", type=pathlib.Path, default=DEFAULT_BIN, help="the tokensieve binary")
    ap.add_argument("--tie-tol", type=float, default=DEFAULT_TIE_TOL,
                    help="largest margin of a difference still read as a float32-vs-float64 near-tie")
    ap.add_argument("--no-exact", action="store_true",
                    help="run the engine with its default 8-bit activations (the results' setting): differences "
                         "then include that approximation's noise, so expect some beyond --tie-tol")
    ap.add_argument("--members", type=int, default=DEFAULT_MEMBERS,
                    help="KVSink: reference forwards with float32-level noise on Q/K/V, run when the prompt's "
                         "attention reads codes, to tell which decisions that noise can flip (0: none)")
    ap.add_argument("--score-tol", type=float, default=DEFAULT_SCORE_TOL,
                    help="OrthoRank: largest difference of a logged score from the reference's, relative to the "
                         "larger of the score and the layer's cut (float32 rounding moves them by up to ~2e-3). "
                         "With --no-exact the engine's 8-bit activations move its scores by up to ~8%% (SmolLM2): "
                         "that is reported as score drift beyond --score-tol, apart from the flags, which must still "
                         "be exactly the rule (its k smallest) applied to the engine's own logged scores (else: log "
                         "inconsistent with the policy); pass e.g. --score-tol 0.1 with --no-exact to accept the "
                         "drift")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per policy layer")
    args = ap.parse_args()
    try:
        if args.members < 0:
            raise CrosscheckError(f"--members {args.members} is negative")
        prompt = args.prompt if args.prompt is not None else wikitext_prompt(args.text, args.chars)
        results = crosscheck(args.bin, args.model, prompt, args.policy or DEFAULT_POLICIES, not args.no_exact,
                             args.members, args.score_tol)
    except CrosscheckError as e:
        print(f"crosscheck: {e}", file=sys.stderr)
        return 2
    for r in results:
        if args.verbose:
            for c in r.layers:
                print(f"  {r.spec} {c.describe()}")
        print(r.verdict(args.tie_tol))
    return 0 if all(r.ok(args.tie_tol) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
