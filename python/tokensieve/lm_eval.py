"""lm-evaluation-harness model `tokensieve`: the engine in-process, under any policy stack.

    import tokensieve.lm_eval  # registers the model type
    lm_eval.simple_evaluate(model="tokensieve", model_args="pretrained=models/m.gguf,policy=kvquant:bits=4",
                            tasks=["piqa"])

or lm-eval's own command line:

    python -m tokensieve.lm_eval --model_args pretrained=models/m.gguf,threads=2 --tasks piqa --limit 500

model_args: pretrained (the GGUF), threads (0: every core), n_ctx (0: the model's training context,
at most 4096), max_gen_toks (256), and policy: the CLI's --policy specs. lm-eval splits model_args
at commas, so inside policy write an option list with ';' and stack policies with '+':
policy=kvquant:bits=2;group=128;mode=kivi+kvsink:k=5;profile=profiles/smollm2-135m-kvsink.json.

Scoring is `tokensieve eval`'s: requests are tokenized as lm-eval tokenizes a pair for Hugging Face
models, a context scored with several continuations in a row is prefilled once (not under a policy
whose state cannot be rewound: H2O, SnapKV, one ranking whole calls), and rolling log-likelihoods
use lm-eval's disjoint windows with the model's BOS (else EOS) as the prefix token, the text
tokenized as the model does (with its BOS if it adds one).
"""
from __future__ import annotations

import sys

import lm_eval.models  # noqa: F401  lm-eval loads its own models only into an empty registry: first
from lm_eval import utils
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import normalize_gen_kwargs

import tokensieve


def policy_specs(policy: str | None) -> list[str]:
    """model_args' policy=A:k=v;k=v+B:... as the CLI's specs."""
    return [p.replace(";", ",") for p in (policy or "").split("+") if p]


@register_model("tokensieve")
class TokensieveLM(LM):
    def __init__(self, pretrained: str, policy: str | None = None, threads: int = 0, n_ctx: int = 0,
                 max_gen_toks: int = 256, batch_size=None, max_batch_size=None, device=None):
        # batch_size, max_batch_size, device: lm-eval passes them to every model; one sequence at a
        # time on the CPU here. Any other model_arg is a TypeError, so a typo never runs dense silently.
        super().__init__()
        self.model = tokensieve.Model(pretrained, threads=int(threads))
        self.session = self.model.session(policies=policy_specs(policy), n_ctx=int(n_ctx))
        self.max_gen_toks = int(max_gen_toks)
        tok = self.model.info()["tokenizer"]
        self.prefix_token = tok["bos"] if tok["bos"] >= 0 else tok["eos"]

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> "TokensieveLM":
        args = utils.simple_parse_args_string(arg_string)
        return cls(**args, **{k: v for k, v in (additional_config or {}).items() if v is not None})

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        out = []
        for r in requests:
            context, continuation = r.args
            if context:
                out.append(self.session.loglikelihood(context, continuation))
            else:  # nothing to condition on: the prefix token stands in, as lm-eval's LM.loglikelihood does
                ids = self.model.tokenize(continuation, add_bos=False)
                context_ids, ids = ([self.prefix_token], ids) if ids[0] != self.prefix_token else (ids[:1], ids[1:])
                lp, greedy = self.session.token_logprobs(context_ids + ids, first_target=len(context_ids))
                out.append((float(lp.sum()), bool(greedy.all())))
            self.cache_hook.add_partial("loglikelihood", r.args, out[-1])
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        out = []
        for r in requests:
            (text,) = r.args
            windows = map(utils.make_disjoint_window,
                          utils.get_rolling_token_windows(token_list=self.model.tokenize(text),
                                                          prefix_token=self.prefix_token,
                                                          max_seq_len=self.session.n_ctx, context_len=1))
            total = 0.0
            for context, continuation in windows:
                lp, _ = self.session.token_logprobs(context + continuation, first_target=len(context))
                total += float(lp.sum())
            out.append(total)
            self.cache_hook.add_partial("loglikelihood_rolling", r.args, total)
        return out

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out = []
        for r in requests:
            context, kwargs = r.args
            kw = normalize_gen_kwargs(kwargs, self.max_gen_toks)  # until, max_gen_toks and their aliases
            until, max_tokens = kw["until"], int(kw["max_gen_toks"])
            temperature = float(kw["temperature"]) if kw["do_sample"] else 0.0
            ids = self.model.tokenize(context)
            ids = ids[-max(1, self.session.n_ctx - max_tokens):]  # left-truncated to leave room, as lm-eval
            text = "".join(self.session.generate(ids, max_tokens=max_tokens, temperature=temperature,
                                                 top_k=0, top_p=1.0, min_p=0.0, stop=until))
            out.append(text)
            self.cache_hook.add_partial("generate_until", r.args, text)
        return out


def main() -> None:
    """lm-eval's command line with --model tokensieve."""
    from lm_eval.__main__ import cli_evaluate

    if "--model" not in sys.argv:
        sys.argv[1:1] = ["--model", "tokensieve"]
    cli_evaluate()


if __name__ == "__main__":
    main()
