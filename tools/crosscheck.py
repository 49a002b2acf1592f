#!/usr/bin/env python3
"""Cross-check a token-sparsification policy's selection against an independent NumPy recomputation.

Why: Token Filtering and ZipVL did not reproduce their papers' claims on SmolLM2 (docs/results/).
Before calling that the method's failure we must know the engine selects the tokens the method
says it should. This tool runs the engine on one prompt with a policy and its DecisionLog, then
recomputes the selection in float64 from the dequantized GGUF weights with the NumPy forward pass
of tools/numpy_llama.py (no engine code, no PyTorch), and compares them layer by layer.

What the reference does, per layer, over the prompt's token ids (from `tokensieve tokenize`):
  * RMSNorm, Q/K/V, RoPE in float64; the policy's rule, re-implemented from the paper's equations
    and the engine's documented semantics (src/policies/*/ headers), decides the layer's tokens;
  * the forward pass then goes on with the engine's decisions from the DecisionLog (which tokens
    ran attention, whose K/V were cached), so that one decision flipped by a near-tie cannot
    cascade into later layers or into Token Filtering's threshold controller: every decision is
    judged on its own, with its margin (how far the reference's quantity is from flipping it).
    When no decision differs, this run is the reference's own free run;
  * attention reads K/V rounded to IEEE half, the engine's KV-cache format; the policy's scores
    read the unrounded post-RoPE K/V (and queries), as the engine's hooks do.
The engine runs with --exact (float32 activations in its matrix products; its default 8-bit
activations are an approximation checked elsewhere, whose effect --no-exact shows), -t 1, greedy,
one new token, whose text is checked against the reference's argmax at the end.

Policies covered: tokenfilter (options ratio, tail, lr, threshold, decay, fusion=printed|intent|
mean, select=kv|k|v, kv=drop|cache) and zipvl (tau, probes=N|all, seed, score=normalized|sum).
Verdict per policy: "agree" (identical selections), "agree up to near-ties" (every difference has a
margin below --tie-tol) or "DISAGREE"; exit code 0 when every policy agrees.

    python3 tools/crosscheck.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf
    python3 tools/crosscheck.py -m ../shared/models/stories260K.gguf --policy zipvl:tau=0.9,probes=all -v
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable

import gguf
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gguf_vocab import byte_alphabet  # noqa: E402
from numpy_llama import NumpyLlama, causal_mask, load_raw_tensors, read_metadata  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_BIN = REPO / "build" / "bin" / "tokensieve"
DEFAULT_POLICIES = ["tokenfilter:ratio=0.3", "zipvl:tau=0.975"]
DEFAULT_TIE_TOL = 1e-4
DEFAULT_DATA = pathlib.Path(os.environ.get("TS_DATA_DIR", REPO.parent / "shared" / "data"))
DEFAULT_TEXT = DEFAULT_DATA / "wikitext2" / "wiki.test.raw"


# --------------------------------------------------------------------------------------------------
# inputs: prompt, engine run, decision log


def wikitext_prompt(path: pathlib.Path, chars: int) -> str:
    """The first paragraph longer than `chars` of a WikiText-2 file, cut back to a word boundary within
    `chars`."""
    with open(path, encoding="utf-8") as f:
        paragraph = next(line for line in f if len(line) > chars).rstrip("\n")
    return paragraph[: paragraph.rindex(" ", 0, chars)]


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    name, _, rest = spec.partition(":")
    options = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(f"crosscheck: cannot read option {item!r} of {spec!r}")
        options[key] = value
    return name, options


def tokenize(binary: pathlib.Path, model: str, prompt: str) -> list[int]:
    res = subprocess.run([str(binary), "tokenize", "-m", model, "-t", "1", "-p", prompt],
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


@dataclass
class EngineRun:
    flags: np.ndarray  # [layer][position] TokenFlag bits of the DecisionLog
    legend: dict[str, int]
    new_text: bytes  # the greedy token printed after the prompt


def run_engine(binary: pathlib.Path, model: str, prompt: str, spec: str, exact: bool = True) -> EngineRun:
    with tempfile.TemporaryDirectory() as tmp:
        log_path = os.path.join(tmp, "decisions.json")
        cmd = [str(binary), "run", "-m", model, "-p", prompt, "-n", "1", "--temp", "0", "-t", "1",
               "--policy", spec, "--decision-log", log_path] + (["--exact"] if exact else [])
        res = subprocess.run(cmd, capture_output=True)
        if res.returncode != 0:
            raise RuntimeError(f"crosscheck: {' '.join(cmd[:2])} --policy {spec} failed: {res.stderr.decode()}")
        with open(log_path, encoding="utf-8") as f:
            log = json.load(f)
    printed, echo = res.stdout, prompt.encode()
    if not (printed.startswith(echo) and printed.endswith(b"\n")):
        raise RuntimeError(f"crosscheck: `tokensieve run` printed {printed[-200:]!r}, not the prompt and one token")
    return EngineRun(np.array(log["flags"], dtype=np.int64), log["legend"], printed[len(echo):-1])


def token_bytes(path: str, token_id: int) -> bytes:
    """The text of one token as the engine prints it: GPT-2 byte spelling or SentencePiece pieces."""
    reader = gguf.GGUFReader(path)
    piece = reader.fields["tokenizer.ggml.tokens"].contents()[token_id]
    if reader.fields["tokenizer.ggml.model"].contents() == "gpt2":
        byte_of = {ch: b for b, ch in enumerate(byte_alphabet())}
        return bytes(byte_of[ch] for ch in piece)
    m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
    return bytes([int(m.group(1), 16)]) if m else piece.replace("\u2581", " ").encode()


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


def reject_unknown(options: dict[str, str], allowed: set[str], policy: str) -> None:
    unknown = set(options) - allowed
    if unknown:
        raise SystemExit(f"crosscheck: {policy} option(s) {sorted(unknown)} are not covered by the cross-check")


class TokenFilterReference:
    """Token Filtering (paper 003; src/policies/token_filter/token_filter.h): in the last round(tail*L)
    layers every token after the first compares its post-RoPE key and value, per KV head, with EMA
    anchors of the previous tokens' (cosine); s = mean over heads, sigma^2 = population variance over
    heads; S = alpha*s_k + (1-alpha)*s_v with Eq. 1's alpha; the layer's threshold moves by
    lr*(skip rate so far - P) before each decision (Eq. 4) and the token skips attention when S > T."""

    def __init__(self, options: dict[str, str], model: NumpyLlama):
        reject_unknown(options, {"ratio", "tail", "lr", "threshold", "decay", "fusion", "select", "kv"},
                       "tokenfilter")
        self.ratio = float(options.get("ratio", 0.5))
        tail = float(options.get("tail", 0.5))
        n = min(max(int(np.floor(tail * model.n_layer + 0.5)), 1), model.n_layer)
        self.layers = set(range(model.n_layer - n, model.n_layer))
        self.target = self.ratio * model.n_layer / n
        if self.target > 1 + 1e-9:
            raise SystemExit(f"crosscheck: tokenfilter ratio {self.ratio} exceeds what {n} layers can skip")
        self.lr = float(options.get("lr", 0.01))
        self.threshold0 = float(options.get("threshold", 0.5))
        self.decay = float(options.get("decay", 0.9))
        select = options.get("select", "kv")
        self.fusion = {"k": "key", "v": "value"}.get(select, options.get("fusion", "printed"))
        self.cache_skipped_kv = options.get("kv", "drop") == "cache"

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
        self.tau = float(options.get("tau", 0.975))
        probes = options.get("probes", "128")
        self.n_probes = 0 if probes == "all" else int(probes)
        self.seed = int(options.get("seed", 0))
        self.normalized = options.get("score", "normalized") == "normalized"
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


POLICIES = {"tokenfilter": TokenFilterReference, "zipvl": ZipVLReference}


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


@dataclass
class PolicyCheck:
    spec: str
    n_tokens: int
    layers: list[LayerCheck] = field(default_factory=list)
    flag_errors: list[str] = field(default_factory=list)
    next_token: str = ""
    next_token_ok: bool = True

    def n_decisions(self) -> int:
        return sum(len(c.engine_kept) for c in self.layers)

    def n_diff(self) -> int:
        return sum(len(c.diff_margins) for c in self.layers)

    def worst(self) -> float:
        return max((float(c.diff_margins.max()) for c in self.layers if len(c.diff_margins)), default=0.0)

    def ok(self, tie_tol: float) -> bool:
        return not self.flag_errors and self.next_token_ok and self.worst() < tie_tol

    def verdict(self, tie_tol: float) -> str:
        closest = min(c.closest for c in self.layers)
        what = (f"{self.spec}: {self.n_decisions()} token-layer decisions over {len(self.layers)} layers "
                f"({self.n_tokens} tokens); closest agreeing margin {closest:.2e}; {self.next_token}")
        if self.flag_errors:
            return f"DISAGREE {what}; log inconsistent with the policy: {self.flag_errors[0]}"
        if self.n_diff() == 0 and self.next_token_ok:
            return f"agree: identical selections at every layer; {what}"
        if self.ok(tie_tol):
            return (f"agree up to near-ties: {self.n_diff()} decisions differ, every one within "
                    f"{self.worst():.2e} < {tie_tol:g} of flipping; {what}")
        return f"DISAGREE: {self.n_diff()} decisions differ (largest margin {self.worst():.2e}); {what}"


def to_half(x: np.ndarray) -> np.ndarray:
    """The value the engine's F16 KV cache holds."""
    return x.astype(np.float16).astype(x.dtype)


def check_policy(model: NumpyLlama, model_path: str, ids: list[int], run: EngineRun, spec: str) -> PolicyCheck:
    name, options = parse_spec(spec)
    if name not in POLICIES:
        raise SystemExit(f"crosscheck: no reference for policy {name!r} (covered: {', '.join(POLICIES)})")
    policy = POLICIES[name](options, model)
    n = len(ids)
    result = PolicyCheck(spec, n)
    if run.flags.shape != (model.n_layer, n):
        raise SystemExit(f"crosscheck: the log has flags {run.flags.shape}, expected {(model.n_layer, n)}: the "
                         "engine did not run the token ids of `tokensieve tokenize`")
    ran_attn, ran_ffn, kv_cached = (run.legend[k] for k in ("ran_attention", "ran_ffn", "kv_cached"))
    x = model.embed(ids)
    cos, sin = model.rope_tables(np.arange(n))
    for layer in range(model.n_layer):
        flags = run.flags[layer]
        engine_kept = (flags & ran_attn) != 0
        engine_cached = (flags & kv_cached) != 0
        if not ((flags & ran_ffn) != 0).all():
            result.flag_errors.append(f"layer {layer}: some token skipped the FFN")
        q, k, v = model.qkv(layer, model.rms_norm(x, f"blk.{layer}.attn_norm.weight"), cos, sin)
        if layer in policy.layers:
            d = policy.decide(layer, q, k, v, engine_kept)
            diff = d.kept != engine_kept
            agree = np.abs(d.margin[~diff])
            agree = agree[~np.isnan(agree)]
            explained = d.explain(diff) if diff.any() else np.zeros(0)
            result.layers.append(LayerCheck(layer, engine_kept, d.kept, explained, float(agree.min(initial=np.inf)),
                                            d.note))
            expected_cached = np.ones(n, dtype=bool) if policy.cache_skipped_kv else engine_kept
            if (engine_cached != expected_cached).any():
                result.flag_errors.append(f"layer {layer}: K/V cached for tokens "
                                          f"{np.flatnonzero(engine_cached != expected_cached).tolist()} "
                                          "against the policy's kv rule")
        elif not (engine_kept.all() and engine_cached.all()):
            result.flag_errors.append(f"layer {layer}: the policy does not act here, but the log is not dense")
        # Go on with the engine's decisions: its attending rows over its cached keys.
        rows = np.flatnonzero(engine_kept)
        allowed = causal_mask(n)[rows] & engine_cached[None, :]
        a = model.attention(q[rows], to_half(k), to_half(v), allowed)
        x[rows] += model.attn_output(layer, a)
        x = x + model.ffn(layer, x)
    logits = model.output_logits(x[-1:])[0]
    best, second = np.argsort(logits)[::-1][:2]
    ref_text = token_bytes(model_path, int(best))
    result.next_token_ok = ref_text == run.new_text
    result.next_token = (f"next token {'=' if result.next_token_ok else '!='} engine's "
                         f"({ref_text!r} vs {run.new_text!r}, top-2 logit gap {logits[best] - logits[second]:.3f})")
    return result


def crosscheck(binary: pathlib.Path, model_path: str, prompt: str, specs: list[str],
               exact: bool = True) -> list[PolicyCheck]:
    ids = tokenize(binary, model_path, prompt)
    model = NumpyLlama(load_raw_tensors(model_path), read_metadata(model_path), np.float64)
    return [check_policy(model, model_path, ids, run_engine(binary, model_path, prompt, spec, exact), spec)
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
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per policy layer")
    args = ap.parse_args()
    prompt = args.prompt if args.prompt is not None else wikitext_prompt(args.text, args.chars)
    results = crosscheck(args.bin, args.model, prompt, args.policy or DEFAULT_POLICIES, not args.no_exact)
    for r in results:
        if args.verbose:
            for c in r.layers:
                differ = ", ".join(f"{t} ({m:.2e})" for t, m in zip(np.flatnonzero(c.engine_kept != c.ref_kept),
                                                                    c.diff_margins))
                print(f"  {r.spec} layer {c.layer:2d}: engine keeps {int(c.engine_kept.sum()):4d}, reference "
                      f"{int(c.ref_kept.sum()):4d}; closest agreeing margin {c.closest:.2e}; {c.note}"
                      + (f"; differ at token (margin) {differ}" if differ else ""))
        print(r.verdict(args.tie_tol))
    return 0 if all(r.ok(args.tie_tol) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
