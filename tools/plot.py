#!/usr/bin/env python3
"""Figures from tokensieve's measurements (matplotlib, PNG). One subcommand per kind of figure:

  sweep CSV -o PNG [--x sparsity|throughput|speedup] [--setting LABEL] [--tasks a,b]
      quality against sparsity or speed from `tokensieve sweep`'s sweep.csv, like the papers' trade-off
      figures: one panel per task (its headline metric: acc, ROUGE-L / exact match, or perplexity, where
      lower is better), one line per setting, the points of a line ordered along x and labelled with
      their policy. Dense rows sit at sparsity 0 / speedup 1.
"""
import argparse
import csv
import sys

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
    args = ap.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
