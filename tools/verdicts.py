#!/usr/bin/env python3
"""Markdown verdict table from `tokensieve sweep`'s sweep.csv: each row paired with its baseline row.

    tools/verdicts.py docs/results/grids/orthorank-smollm2.csv [more.csv ...]

One line per row that has a paired comparison (columns baseline, diff, diff_lo, diff_hi of the CSV):
the row's and its baseline's value, B - A with the paired bootstrap 95% interval, McNemar's p for
right/wrong outcomes, and the verdict. "better" / "worse" when the interval excludes 0 (perplexity:
lower is better; every other metric: higher is better), else "no difference detected" (the interval
says how large a difference the data can still hide).
"""
import argparse
import csv
import sys

LOWER_IS_BETTER = {"ppl"}


def verdict(metric, lo, hi):
    if lo <= 0 <= hi:
        return "no difference detected"
    improved = hi < 0 if metric in LOWER_IS_BETTER else lo > 0
    return "better" if improved else "worse"


def table(paths):
    lines = ["| row (B) | baseline (A) | task | metric | A | B | B − A (95% CI) | McNemar p | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for path in paths:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        value = {(r["policy"], r["setting"], r["task"]): r["value"] for r in rows}
        for r in rows:
            if not r.get("diff"):
                continue
            lo, hi, diff = float(r["diff_lo"]), float(r["diff_hi"]), float(r["diff"])
            a = value.get((r["baseline"], r["setting"], r["task"]))
            a = f"{float(a):.4g}" if a else "–"  # the baseline row left out of this CSV
            lines.append(f"| {r['policy']} | {r['baseline']} | {r['task']} ({r['setting']}) | {r['metric']} | "
                         f"{a} | {float(r['value']):.4g} | {diff:+.3g} [{lo:+.3g}, {hi:+.3g}] | "
                         f"{r['mcnemar_p'] or '–'} | {verdict(r['metric'], lo, hi)} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    args = ap.parse_args()
    try:
        print(table(args.csv))
    except (OSError, KeyError, ValueError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
