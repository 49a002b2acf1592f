#!/usr/bin/env python3
"""Figures from tokensieve's measurements (matplotlib, PNG). One subcommand per kind of figure:

  sweep CSV -o PNG [--x sparsity|throughput|speedup] [--setting LABEL] [--tasks a,b]
      quality against sparsity or speed from `tokensieve sweep`'s sweep.csv, like the papers' trade-off
      figures: one panel per task (its headline metric: acc, ROUGE-L / exact match, or perplexity, where
      lower is better), one line per setting, the points of a line ordered along x and labelled with
      their policy. Dense rows sit at sparsity 0 / speedup 1.
  sink CSV -o PNG [--tokens N] [--keep-newlines]
      OrthoRank's sink statistics from `tokensieve analyze sink`: cos(sink, token) per layer (paper
      Fig. 2), norms of the normalized states (Fig. 12) and the layer-by-layer similarity of the sink
      and of other positions (Fig. 3).
"""
import argparse
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

X_LABELS = {
    "sparsity": "sparsity (nominal, else measured)",
    "throughput": "throughput (examples/s; tokens/s for perplexity)",
    "speedup": "speed-up over dense (same setting and task)",
}
Y_LABELS = {"acc": "accuracy", "ppl": "perplexity (lower is better)", "rouge_l": "ROUGE-L F",
            "exact_match": "exact match"}


def read_rows(path, x):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    need = {"policy", "setting", "task", "metric", "value", x}
    if not rows or not need <= set(rows[0]):
        sys.exit(f"error: {path}: not a tokensieve sweep CSV with columns {sorted(need)}")
    usable = [r for r in rows if r[x] != ""]
    if not usable:
        sys.exit(f"error: {path}: no row has a value in column '{x}'")
    return usable


def plot_sweep(args):
    rows = read_rows(args.csv, args.x)
    if args.setting:
        rows = [r for r in rows if r["setting"] in args.setting]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    if args.tasks:
        tasks = [t for t in tasks if t in args.tasks.split(",")]
    if not tasks:
        sys.exit("error: no rows left to plot")
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        task_rows = [r for r in rows if r["task"] == task]
        for setting in dict.fromkeys(r["setting"] for r in task_rows):
            pts = sorted((float(r[args.x]), float(r["value"]), r["policy"]) for r in task_rows
                         if r["setting"] == setting)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=setting)
            for px, py, policy in pts:
                ax.annotate(policy, (px, py), fontsize=6, xytext=(3, 3), textcoords="offset points")
        metric = task_rows[0]["metric"]
        ax.set_title(task)
        ax.set_xlabel(X_LABELS[args.x], fontsize=8)
        ax.set_ylabel(Y_LABELS.get(metric, metric))
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, title="setting", title_fontsize=7)
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)


def read_sink_csv(path):
    """Rows of `analyze sink` as dicts with typed fields; '\\n' tokens flagged as in the CSV."""
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            rows.append({
                "stat": r["stat"],
                "position": int(r["position"]),
                "token": r["token"],
                "newline": r["newline"] == "1",
                "layer": int(r["layer"]),
                "layer2": int(r["layer2"]) if r["layer2"] else None,
                "value": float(r["value"]),
            })
    if not rows:
        sys.exit(f"error: {path}: no rows")
    return rows


def plot_sink(args):
    rows = read_sink_csv(args.csv)
    # The paper leaves "\n" tokens out of its figures; the sink (position 0) stays whatever it is.
    keep = lambda r: args.keep_newlines or not r["newline"] or r["position"] == 0  # noqa: E731
    sink_cos = defaultdict(dict)  # position -> layer -> cos
    norms = defaultdict(dict)
    layer_cos = defaultdict(dict)  # position -> (l1, l2) -> cos
    for r in rows:
        if r["stat"] == "sink_cos" and keep(r):
            sink_cos[r["position"]][r["layer"]] = r["value"]
        elif r["stat"] == "norm" and keep(r):
            norms[r["position"]][r["layer"]] = r["value"]
        elif r["stat"] == "layer_cos":
            layer_cos[r["position"]][(r["layer"], r["layer2"])] = r["value"]
    n_layers = 1 + max(r["layer"] for r in rows)
    layers = list(range(n_layers))
    mats = sorted(layer_cos)[:3]
    fig, grid = plt.subplots(2, 3, figsize=(15, 9), squeeze=False)
    axes = [grid[0][0], grid[0][1]] + list(grid[1][: len(mats)])
    for ax in list(grid[0][2:]) + list(grid[1][len(mats):]):
        ax.axis("off")

    ax = axes[0]
    shown = sorted(sink_cos)[: args.tokens]
    for p in shown:
        ax.plot(layers, [sink_cos[p].get(l) for l in layers], lw=1, alpha=0.7, label=f"token {p}")
    others = [p for p in sink_cos if p != 0]
    mean = [sum(sink_cos[p][l] for p in others) / len(others) for l in layers]
    ax.plot(layers, mean, "k", lw=2.5, label=f"mean of {len(others)}")
    ax.set(xlabel="layer", ylabel="cos(h̄₀, h̄ᵢ)", title="Cosine to the sink (Fig. 2)")
    ax.axhline(0, color="grey", lw=0.5)
    ax.legend(fontsize=7, ncol=2)

    ax = axes[1]
    others = [p for p in norms if p != 0]
    ax.plot(layers, [norms[0].get(l) for l in layers], "r", lw=2, label="sink (0)")
    for p in others[-10:]:
        ax.plot(layers, [norms[p].get(l) for l in layers], "b", lw=0.8, alpha=0.5)
    ax.plot([], [], "b", label=f"tokens {others[-10]}-{others[-1]}" if len(others) >= 10 else "tokens")
    ax.set(xlabel="layer", ylabel="‖h̄ᵢ‖", yscale="log", title="Norms of normalized states (Fig. 12)")
    ax.legend(fontsize=8)

    for ax, p in zip(axes[2:], mats):
        m = [[layer_cos[p].get((a, b), float("nan")) for b in layers] for a in layers]
        im = ax.imshow(m, origin="lower", vmin=min(0.0, min(min(row) for row in m)), vmax=1, cmap="viridis")
        ax.set(xlabel="layer b", ylabel="layer a", title=f"cos(h̄ₚ at layer a, h̄ₚ at layer b), p = {p} (Fig. 3)")
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.suptitle(args.title or args.csv)
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sw = sub.add_parser("sweep", help="quality vs sparsity / throughput from tokensieve sweep's CSV")
    sw.add_argument("csv")
    sw.add_argument("-o", "--output", required=True, help="PNG file")
    sw.add_argument("--x", choices=sorted(X_LABELS), default="sparsity")
    sw.add_argument("--setting", action="append", help="only this setting label (repeatable)")
    sw.add_argument("--tasks", help="comma-separated tasks to draw (default: all)")
    sw.add_argument("--dpi", type=int, default=150)
    sw.set_defaults(run=plot_sweep)
    sk = sub.add_parser("sink", help="OrthoRank sink statistics from tokensieve analyze sink's CSV")
    sk.add_argument("csv")
    sk.add_argument("-o", "--output", required=True, help="PNG file")
    sk.add_argument("--tokens", type=int, default=10, help="token curves drawn in the cosine panel (default 10)")
    sk.add_argument("--keep-newlines", action="store_true", help="include tokens holding a line break")
    sk.add_argument("--title", default="")
    sk.add_argument("--dpi", type=int, default=80)
    sk.set_defaults(run=plot_sink)
    args = ap.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
