#!/usr/bin/env python3
"""Dense, OrthoRank, KVSink + INT4 KV and TokenButler on one long prompt: quality (perplexity of the
prompt's second half), speed (prefill and decode tokens/s), KV memory, and a heatmap of what each
policy decided per position and layer.

    PYTHONPATH=build/python python3 examples/compare_policies.py [--model M] [--tokens 1536] [--out docs/…png]

(After `pip install .` no PYTHONPATH is needed.) The prompt is the start of WikiText-2's test set.
"""
import argparse
import math
import pathlib
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import tokensieve  # noqa: E402
from tokensieve.policies import KVQuant, KVSink, OrthoRank, TokenButler  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
POLICIES = {
    "dense": [],
    "OrthoRank 20%": [OrthoRank(profile=ROOT / "profiles/smollm2-135m-orthorank-shortened-20.json")],
    "KVSink-5 + INT4 KV": [KVQuant(bits=4, group=32), KVSink(k=5, profile=ROOT / "profiles/smollm2-135m-kvsink.json")],
    "TokenButler 50%": [TokenButler(keep=0.5, predictor=ROOT / "predictors/smollm2-135m-instruct.butler.safetensors")],
}


def decided(name: str, d: dict) -> tuple[np.ndarray, str]:
    """The (position, layer) map that shows the policy's decision, and what it shows."""
    if name.startswith("OrthoRank"):
        return (d["flags"] & tokensieve.RAN_FFN) != 0, "ran the layer"
    if name.startswith("KVSink"):
        return (d["flags"] & tokensieve.KV_FULL_PRECISION) != 0, "K/V kept at full precision"
    if name.startswith("TokenButler"):
        keys = d["keys_attended"].astype(float)
        positions = np.arange(1, keys.shape[0] + 1)[:, None, None]
        frac = np.where(keys < 0, 1.0, keys / positions).mean(axis=2)
        return frac, "keys attended / cached (mean of heads)"
    return np.ones_like(d["flags"], dtype=bool), "dense"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--text", default=str(ROOT.parent / "shared/data/wikitext2/wiki.test.raw"))
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "docs/compare_policies.png"))
    args = ap.parse_args()

    model = tokensieve.Model(args.model, threads=args.threads)
    ids = model.tokenize(pathlib.Path(args.text).read_text()[:40 * args.tokens])[:args.tokens]
    print(f"{model.path}: {len(ids)}-token prompt, {args.threads} threads")
    print(f"{'policy':<20} {'PPL 2nd half':>12} {'prefill t/s':>12} {'decode t/s':>11} {'KV MiB':>8}")
    maps = {}
    for name, stack in POLICIES.items():
        s = model.session(policies=stack, n_ctx=len(ids) + args.gen + 1)
        tokens = s.generate_ids(ids, max_tokens=args.gen, temperature=0, ignore_eos=True)
        t0 = time.perf_counter()
        next(tokens)  # the prompt in one call, then the first token sampled
        t1 = time.perf_counter()
        n = sum(1 for _ in tokens)
        t2 = time.perf_counter()
        kv = s.kv_bytes
        d = s.decisions()
        maps[name] = decided(name, d) if name != "dense" else (np.ones((s.n_past, model.n_layers)), "dense")
        lp, _ = s.token_logprobs(ids, first_target=len(ids) // 2)  # quality: the second half given the first
        print(f"{name:<20} {math.exp(-lp.mean()):>12.3f} {len(ids) / (t1 - t0):>12.1f} {n / (t2 - t1):>11.1f} "
              f"{kv / 2**20:>8.1f}")

    fig, axes = plt.subplots(1, len(maps), figsize=(4 * len(maps), 4), sharey=True)
    for ax, (name, (m, what)) in zip(axes, maps.items()):
        m = np.asarray(m, dtype=float)
        if m.mean() < 0.01:  # a handful of positions (KVSink's sinks): too thin for a heatmap, so dots
            pos, layer = np.nonzero(m)
            ax.scatter(pos, layer, s=12, color="tab:red")
            ax.set_xlim(0, m.shape[0])
            ax.set_xscale("symlog", linthresh=16)
            ax.set_xlabel(f"position (log scale): {sorted(set(pos.tolist()))}")
        else:
            im = ax.imshow(m.T, aspect="auto", origin="lower", cmap="viridis", vmin=0, vmax=1,
                           interpolation="nearest")
        ax.set_title(f"{name}\n{what}", fontsize=9)
        if not ax.get_xlabel():
            ax.set_xlabel("position")
    axes[0].set_ylabel("layer")
    fig.colorbar(im, ax=axes, shrink=0.8)
    fig.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"heatmap: {args.out}")


if __name__ == "__main__":
    main()
