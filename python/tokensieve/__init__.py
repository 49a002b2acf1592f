"""tokensieve in-process: GGUF inference with dynamic token sparsification.

    import tokensieve
    from tokensieve.policies import KVQuant, KVSink
    m = tokensieve.Model("models/SmolLM2-135M-Instruct.Q4_1.gguf", threads=2)
    s = m.session(policies=[KVQuant(bits=4)], n_ctx=4096)
    print("".join(s.generate("The capital of France is", max_tokens=16, temperature=0)))

The engine runs with the GIL released: sessions on different threads generate at once. Engine
errors (a bad file, a bad policy option) raise tokensieve.Error (a ValueError) with the engine's
one-line message.
"""
from __future__ import annotations

import os
from typing import Iterable, Iterator, Sequence, Union

from . import _tokensieve as _ext
from . import policies
from ._tokensieve import (KV_CACHED, KV_FULL_PRECISION, KV_LOW_PRECISION, RAN_ATTENTION, RAN_FFN, Error)

Error.__module__ = __name__  # shown as tokensieve.Error

__all__ = ["Model", "Session", "Error", "perplexity", "evaluate", "task_names", "policies", "RAN_ATTENTION",
           "RAN_FFN", "KV_CACHED", "KV_FULL_PRECISION", "KV_LOW_PRECISION"]

PolicyLike = Union[str, "policies.Policy"]


def _specs(given: PolicyLike | Iterable[PolicyLike] | None) -> list[str]:
    """Policy objects or CLI specs -> checked CLI specs, in order."""
    if given is None:
        return []
    if isinstance(given, (str, policies.Policy)):
        given = [given]
    specs = []
    for p in given:
        if not isinstance(p, (str, policies.Policy)):
            raise TypeError(f"a policy is a tokensieve.policies object or a spec string, not {type(p).__name__}")
        spec = str(p)
        _ext.check_policy(spec)
        specs.append(spec)
    return specs


class Model:
    """A GGUF model, loaded once; sessions and reports on it share its weights.

    threads: worker threads of each session and report (0: every core).
    exact: float activations in the matrix products (the reference precision; slower).
    """

    def __init__(self, path: str | os.PathLike, threads: int = 0, exact: bool = False):
        self._model = _ext.Model(os.fspath(path), threads, exact)

    path = property(lambda self: self._model.path)
    threads = property(lambda self: self._model.threads)
    n_vocab = property(lambda self: self._model.n_vocab)
    n_layers = property(lambda self: self._model.n_layers)
    n_heads = property(lambda self: self._model.n_heads)
    n_ctx_train = property(lambda self: self._model.n_ctx_train)

    def info(self, policies: PolicyLike | Iterable[PolicyLike] | None = None) -> dict:
        """What `tokensieve info --json` prints (a kvquant policy sets the KV format counted)."""
        return self._model.info(_specs(policies))

    def tokenize(self, text: str, add_bos: bool | None = None, special: bool = True) -> list[int]:
        """Token ids of text; add_bos None follows the model's default; special: parse control-token text."""
        return self._model.tokenize(text, add_bos, special)

    def detokenize(self, ids: Sequence[int], special: bool = False) -> str:
        return self._model.detokenize(list(ids), special)

    def chat_prompt(self, user: str) -> str:
        """A user message in the model's chat template, ready for the assistant's reply."""
        return self._model.chat_prompt(user)

    def session(self, policies: PolicyLike | Iterable[PolicyLike] | None = None, n_ctx: int = 0) -> "Session":
        """A sequence under a policy stack; n_ctx 0: min(4096, the model's training context)."""
        return Session(self, policies, n_ctx)

    def __repr__(self) -> str:
        return f"tokensieve.Model({self.path!r}, threads={self.threads})"


class Session:
    """One sequence on a model under a policy stack (None: dense), as `tokensieve run` runs it.

    Each call that starts a sequence (generate, logits, token_logprobs) clears the cache and the
    decision log; consecutive loglikelihood calls with the same context reuse it (an example's
    choices), and a new context starts a fresh sequence, as `tokensieve eval` scores. Use one
    session per thread.
    """

    def __init__(self, model: Model, policies: PolicyLike | Iterable[PolicyLike] | None = None, n_ctx: int = 0):
        self.model = model
        self.policies = _specs(policies)
        self._s = _ext.Session(model._model, self.policies, n_ctx)

    n_ctx = property(lambda self: self._s.n_ctx, doc="positions the KV cache holds")
    n_past = property(lambda self: self._s.n_past, doc="positions cached now")
    kv_bytes = property(lambda self: self._s.kv_bytes, doc="bytes of K/V held for the cached positions")
    tokens = property(lambda self: self._s.tokens, doc="the sequence's tokens (prompt and generated)")

    def _prompt_ids(self, prompt: str | Sequence[int], chat: bool) -> list[int]:
        if isinstance(prompt, str):
            return self.model.tokenize(self.model.chat_prompt(prompt) if chat else prompt)
        if chat:
            raise ValueError("chat=True needs the prompt as text")
        return [int(t) for t in prompt]

    def generate_ids(self, prompt: str | Sequence[int], max_tokens: int = 128, temperature: float = 0.8,
                     top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
                     repeat_last_n: int = 64, seed: int = 0, ignore_eos: bool = False,
                     chat: bool = False) -> Iterator[int]:
        """Sampled token ids, one at a time (temperature 0: greedy); sampling as `tokensieve run`."""
        if max_tokens < 0:
            raise ValueError("max_tokens must be >= 0")
        g = self._s.generation(self._prompt_ids(prompt, chat), max_tokens, temperature, top_k, top_p, min_p,
                               repeat_penalty, repeat_last_n, seed, ignore_eos)
        return iter(g.next_id, None)

    def generate(self, prompt: str | Sequence[int], max_tokens: int = 128, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
                 repeat_last_n: int = 64, seed: int = 0, ignore_eos: bool = False, chat: bool = False,
                 stop: str | Sequence[str] | None = None) -> Iterator[str]:
        """The generated text piece by piece (whole UTF-8 characters); ends before a stop string."""
        if max_tokens < 0:
            raise ValueError("max_tokens must be >= 0")
        g = self._s.generation(self._prompt_ids(prompt, chat), max_tokens, temperature, top_k, top_p, min_p,
                               repeat_penalty, repeat_last_n, seed, ignore_eos)
        pieces = iter(g.next_text, None)
        stops = [s for s in ([stop] if isinstance(stop, str) else stop or []) if s]
        return _until(pieces, stops) if stops else pieces

    def complete(self, prompt: str | Sequence[int], **kwargs) -> str:
        """generate(...) joined into one string."""
        return "".join(self.generate(prompt, **kwargs))

    def logits(self, tokens: str | Sequence[int]):
        """Logits of every position of a new sequence: float32 array (len(tokens), n_vocab)."""
        return self._s.logits(self._prompt_ids(tokens, False))

    def token_logprobs(self, tokens: Sequence[int], first_target: int = 1):
        """(log p(tokens[i] | tokens[:i]), is arg-max) for i >= first_target, as float64 and bool arrays."""
        lp, greedy = self._s.token_logprobs([int(t) for t in tokens], first_target)
        return lp, greedy.astype(bool)

    def loglikelihood(self, context: str, continuation: str) -> tuple[float, bool]:
        """lm-eval's (sum of log p(continuation | context), every token the arg-max), tokenized as lm-eval does."""
        return self._s.loglikelihood(context, continuation)

    def decisions(self) -> dict:
        """What the policies decided over the last sequence, as arrays over (position, layer[, head]).

        flags: uint8 bits RAN_ATTENTION | RAN_FFN | KV_CACHED | KV_FULL_PRECISION | KV_LOW_PRECISION;
        scores: float32, NaN where no policy scored; keys_attended: int32 per query head, -1 where no
        policy selected keys; evicted: uint8, the position left that layer's cache; tokens: the ids.
        """
        return self._s.decisions()

    def __repr__(self) -> str:
        return f"tokensieve.Session(policies={self.policies}, n_ctx={self.n_ctx}, n_past={self.n_past})"


def _until(pieces: Iterator[str], stops: list[str]) -> Iterator[str]:
    """pieces up to the first stop string, holding back a tail that may begin one."""
    held = ""
    for piece in pieces:
        held += piece
        found = [i for i in (held.find(s) for s in stops) if i >= 0]
        if found:
            if min(found):
                yield held[:min(found)]
            return
        keep = max((k for s in stops for k in range(1, len(s)) if held.endswith(s[:k])), default=0)
        if len(held) > keep:
            yield held[:len(held) - keep]
            held = held[len(held) - keep:]
    if held:
        yield held


def perplexity(model: Model, text: str | None = None, *, file: str | None = None, dataset: str | None = None,
               ctx: int = 0, policies: PolicyLike | Iterable[PolicyLike] | None = None, protocol: str = "",
               stride: int = 0, chunks: int = 0, data_dir: str = "", samples: str = "") -> dict:
    """What `tokensieve ppl --json` prints, for text, a file or a dataset (wikitext2 | c4 in data_dir)."""
    return _ext.perplexity(model._model, text, file, dataset, _specs(policies), ctx, protocol, stride, chunks,
                           data_dir, samples)


def evaluate(model: Model, tasks: str | Sequence[str], *, policies: PolicyLike | Iterable[PolicyLike] | None = None,
             limit: int = 0, seed: int | None = None, ctx: int = 0, data_dir: str = "", samples: str = "") -> dict:
    """What `tokensieve eval --json` prints: {task: metrics, ..., "sparsity": ...}."""
    tasks = tasks.split(",") if isinstance(tasks, str) else list(tasks)
    return _ext.evaluate(model._model, tasks, _specs(policies), limit, seed, ctx, data_dir, samples)


def task_names() -> list[str]:
    """The tasks evaluate() accepts."""
    return _ext.task_names()
