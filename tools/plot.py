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
  summary --grids DIR|CSV... --speed JSONL -o PNG [--exclude NAME] [--task c4] [--threads 2] [--length 8192]
      every method of every sweep grid, quality against speed, one panel per model: y = perplexity over
      the grid's own dense row in % (its paired 95% interval where the row's baseline is dense), x =
      speed-up over dense from bench/sparse_speed.py's records. A row is matched to the records of the
      same model, thread count and policies (options equal; a profile= / predictor= file by its name
      without the model's own prefix, so smollm2-135m-orthorank-sleb-20.json is orthorank-sleb-20.json
      and matches only that kind of profile), run at the engine's own SIMD level: decode at --length for
      selection, eviction and quantized KV, prefill of --length for layer / token skipping (OrthoRank,
      SLEB, Token Filtering, ZipVL, ...); where --length was not measured, the measured length nearest to
      it by ratio (|log(length / --length)|, a tie to the shorter); the AVX-512 machine's record before
      the AVX2-only one's, the latest of a cell. No other policies' speed stands in: a row whose exact
      policies were not measured has no speed figure. Each grid CSV needs its sweep spec (same name,
      .json) for the model and each row's policies; a row repeating the policies and setting of a grid
      read before (sorted names, or the order given) is left out. Prints the points as a table; rows
      without a speed record are listed, not drawn.
"""
import argparse
import csv
import json
import math
import re
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

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


# --- summary: quality against speed, every method of every grid ------------------------------------------

PATH_OPTIONS = {"profile", "predictor"}  # options naming a file: compared by file_kind, not by path
# Policies that save work in the prompt (layers or tokens skipped): their headline speed is prefill.
PREFILL_POLICIES = {"orthorank", "sleb", "shortened", "tokenfilter", "attnremove", "zipvl", "fixedratio"}
POLICY_NAMES = {"orthorank": "OrthoRank", "sleb": "SLEB", "shortened": "Shortened", "attnremove": "attention removal",
                "zipvl": "ZipVL", "fixedratio": "fixed ratio", "tokenbutler": "TokenButler", "oracle": "Oracle",
                "h2o": "H2O", "snapkv": "SnapKV", "quest": "Quest", "streaming": "StreamingLLM"}
MACHINES = {"avx512": "AVX-512", "avx2": "AVX2-only"}
MACHINE_MARKERS = {"avx512": "o", "avx2": "s"}
GRID_COLUMNS = {"policy", "setting", "task", "metric", "value", "baseline", "diff", "diff_lo", "diff_hi"}
SPEED_FIELDS = ("model_file", "family", "mode", "length", "threads", "specs", "speedup_vs_dense", "utc")


def parse_spec(spec):
    """'name:k=v,k=v' as (name, {k: v}); a piece without '=' continues the previous value (layers=1,3),
    empty pieces (a trailing comma) are dropped as in tools/crosscheck.py, a key given twice is an error."""
    name, _, rest = spec.partition(":")
    if not name.strip():
        raise ValueError(f"policy spec '{spec}': no policy name")
    opts, key = {}, None
    for piece in filter(None, (p.strip() for p in rest.split(","))):
        k, eq, v = piece.partition("=")
        if eq:
            key = k.strip()
            if not key:
                raise ValueError(f"policy spec '{spec}': '{piece}' has no key")
            if key in opts:
                raise ValueError(f"policy spec '{spec}': option '{key}' given twice")
            opts[key] = v.strip()
        elif key is None:
            raise ValueError(f"policy spec '{spec}': '{piece}' is not key=value")
        else:
            opts[key] += "," + piece
    return name.strip(), opts


def option_value(v):
    try:
        return repr(float(v))  # keep=0.50 is keep=0.5
    except ValueError:
        return v


def squashed(text):
    return text.lower().replace("-", "")


def file_kind(path, model):
    """What a profile / predictor file holds, whichever model it is for: its file name without the model's own
    prefix. profiles/ and predictors/ files start with the model's name (smollm2-135m-, qwen2.5-coder-0.5b-,
    gemma3-270m-): the prefix cut is the longest run of leading '-'-separated words that spells the start of
    the model's file name, case and '-' aside. For SmolLM2-135M-Instruct.Q4_1.gguf,
    .../smollm2-135m-orthorank-sleb-20.json is orthorank-sleb-20.json and
    .../smollm2-135m-instruct.butler-2k.safetensors is instruct.butler-2k.safetensors."""
    words = path.replace("\\", "/").rsplit("/", 1)[-1].split("-")
    own = squashed(Path(model).name)
    cut = 0
    while cut + 1 < len(words) and own.startswith(squashed("".join(words[:cut + 1]))):
        cut += 1
    return "-".join(words[cut:])


def spec_key(specs, model):
    """What a list of policy specs of `model` does: names and options, a profile / predictor file by its
    file_kind (the same kind of file of another model is the same; two kinds of profile are not)."""
    key = []
    for spec in specs:
        name, opts = parse_spec(spec)
        key.append((name, tuple(sorted((k, file_kind(v, model) if k in PATH_OPTIONS else option_value(v))
                                       for k, v in opts.items()))))
    return tuple(sorted(key))


def method_name(specs):
    parts = []
    for spec in specs:
        name, o = parse_spec(spec)
        if name == "kvquant":
            parts.append(f"INT{o.get('bits', '?')}" + (" KIVI" if o.get("mode") == "kivi" else ""))
        elif name == "pfn":
            parts.append(f"PFN-{o.get('n', '?')}")
        elif name == "kvsink":
            parts.append(f"KVSink-{o.get('k', '?')}")
        elif name == "tokenfilter":
            parts.append("random skip" if o.get("select") == "random" else
                         "Token Filtering" + (f" ({o['placement']})" if "placement" in o else ""))
        else:
            parts.append(POLICY_NAMES.get(name, name) + (" shared" if o.get("shared") == "1" else ""))
    return " + ".join(parts)


def model_title(model_file):
    return Path(model_file).name.removesuffix(".gguf")


def model_order(model):
    """Smaller models first, by the size in the name (135M, 0.5B), else by name."""
    m = re.search(r"(\d+(?:\.\d+)?)([MB])\b", model)
    return (float(m.group(1)) * (1e3 if m.group(2) == "B" else 1) if m else math.inf, model)


def grid_files(paths, exclude):
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.glob("*.csv"))
        elif p.is_file():
            files.append(p)
        else:
            sys.exit(f"error: {p}: no such file or directory")
    files = [f for f in files if f.name not in exclude and f.stem not in exclude]
    if not files:
        sys.exit(f"error: no grid CSV in {' '.join(paths)}")
    return files


def read_grid(path, task):
    """The grid's rows of `task` (perplexity) as points: ΔPPL % against the grid's dense row of the same
    setting, with the paired interval where the row's baseline is that dense row."""
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        for r in reader:
            if None in r or None in r.values():  # more fields than the header (key None), or fewer (value None)
                n = len(reader.fieldnames) + len(r[None]) if None in r else sum(v is not None for v in r.values())
                sys.exit(f"error: {path}:{reader.line_num}: {n} fields, the header has {len(reader.fieldnames)}")
            rows.append(r)
    if not rows or not GRID_COLUMNS <= set(rows[0]):
        sys.exit(f"error: {path}: not a tokensieve sweep CSV with columns {sorted(GRID_COLUMNS)}")
    rows = [r for r in rows if r["task"] == task and r["metric"] == "ppl"]
    if not rows:
        return None, []
    spec_path = path.with_suffix(".json")
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
        model = spec["model"]
        specs = {p["label"]: p["specs"] for p in spec["policies"]}
    except OSError:
        sys.exit(f"error: {spec_path}: missing (the sweep spec beside {path.name} names the model and each row's "
                 "policies)")
    except (ValueError, KeyError, TypeError) as e:
        sys.exit(f"error: {spec_path}: not a sweep spec with model and policies ({type(e).__name__}: {e})")
    if not isinstance(model, str) or not model:
        sys.exit(f"error: {spec_path}: model is not a file name")
    for label, policy_specs in specs.items():
        if not isinstance(policy_specs, list) or not all(isinstance(x, str) for x in policy_specs):
            sys.exit(f"error: {spec_path}: policy '{label}': specs is not a list of strings")
        try:
            spec_key(policy_specs, model)
        except ValueError as e:
            sys.exit(f"error: {spec_path}: {e}")
    try:
        dense = {}
        for r in rows:
            if specs.get(r["policy"]) == [] or (r["policy"] == "dense" and r["policy"] not in specs):
                dense[r["setting"]] = (r["policy"], float(r["value"]))
                if not dense[r["setting"]][1] > 0:
                    sys.exit(f"error: {path}: dense perplexity {r['value']} of setting '{r['setting']}' is not "
                             "positive")
        points = []
        for r in rows:
            if r["setting"] not in dense:
                sys.exit(f"error: {path}: no dense row for setting '{r['setting']}'")
            dense_label, base = dense[r["setting"]]
            if r["policy"] == dense_label:
                continue
            value = float(r["value"])
            point = {"model": model, "grid": path.stem, "setting": r["setting"], "label": r["policy"],
                     "specs": specs.get(r["policy"]),
                     "dppl": 100 * (value / base - 1), "lo": None, "hi": None}
            if r["baseline"] == dense_label and r["diff_lo"] and r["diff_hi"]:
                point["lo"], point["hi"] = 100 * float(r["diff_lo"]) / base, 100 * float(r["diff_hi"]) / base
            points.append(point)
    except ValueError as e:
        sys.exit(f"error: {path}: {e}")
    return model, points


def read_speed(path):
    records = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        sys.exit(f"error: {path}: {e.strerror}")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"error: {path}:{i}: invalid JSON ({e.msg})")
        if not isinstance(r, dict):
            sys.exit(f"error: {path}:{i}: not a JSON object")
        if not r.get("ok", True):
            continue
        missing = [k for k in SPEED_FIELDS if k not in r]
        if missing:
            sys.exit(f"error: {path}:{i}: record without {', '.join(missing)} (not a bench/sparse_speed.py record)")
        if "machine" not in r:  # as bench/sparse_speed.py reads its old records: all from AVX2-only machines
            r["machine"] = r.get("simd_used") or "avx2"
        wrong = record_problem(r)
        if wrong:
            sys.exit(f"error: {path}:{i}: unreadable record ({wrong})")
        try:
            r["speedup"] = float(r["speedup_vs_dense"][r["mode"]])
            r["key"] = spec_key(r["specs"], r["model_file"])
        except (KeyError, TypeError, ValueError) as e:
            sys.exit(f"error: {path}:{i}: unreadable record ({type(e).__name__}: {e})")
        if not math.isfinite(r["speedup"]):
            sys.exit(f"error: {path}:{i}: unreadable record (speed-up {r['speedup']})")
        records.append(r)
    return records


def record_problem(r):
    """What is wrong with the types of a speed record's fields, or None."""
    for k in ("model_file", "family", "mode", "utc", "machine"):
        if not isinstance(r[k], str):
            return f"{k} {json.dumps(r[k])} is not a string"
    for k in ("length", "threads"):
        if not isinstance(r[k], int) or isinstance(r[k], bool) or r[k] <= 0:
            return f"{k} {json.dumps(r[k])} is not a positive integer"
    if not isinstance(r["specs"], list) or not all(isinstance(x, str) for x in r["specs"]):
        return f"specs {json.dumps(r['specs'])} is not a list of strings"
    if not isinstance(r["speedup_vs_dense"], dict):
        return "speedup_vs_dense is not an object"
    return None


def headline_mode(specs):
    return "prefill" if all(parse_spec(s)[0] in PREFILL_POLICIES for s in specs) else "decode"


def match_speed(records, point, threads, length):
    """The record of the point's model and exact policies at the headline mode: length `length`, else the
    measured length nearest to it by ratio (least |log(n / length)|; of two as near, the shorter); the
    AVX-512 machine before the AVX2-only one; the latest. None when those policies were not measured."""
    if not point["specs"]:
        return None, 0
    key, mode = spec_key(point["specs"], point["model"]), headline_mode(point["specs"])
    model = Path(point["model"]).name
    cands = [r for r in records if Path(r["model_file"]).name == model and r["threads"] == threads
             and r["mode"] == mode and r.get("simd", "native") == "native" and r["key"] == key and r["speedup"] > 0]
    if not cands:
        return None, 0
    # rounded, so that 4096 and 16384 around 8192 tie exactly
    best = min({r["length"] for r in cands}, key=lambda n: (round(abs(math.log(n / length)), 9), n))
    cands = [r for r in cands if r["length"] == best]
    rank = {"avx512": 0, "avx2": 1}
    top = min(rank.get(r["machine"], 2) for r in cands)
    cands = [r for r in cands if rank.get(r["machine"], 2) == top]
    return max(cands, key=lambda r: r["utc"]), len(cands)


def mode_tag(r):
    size = f"{r['length'] // 1024}K" if r["length"] % 1024 == 0 else str(r["length"])
    return ("pp" if r["mode"] == "prefill" else "d") + size


def pct(v):
    return f"{v:+.1f}" if abs(v) >= 10 else f"{v:+.2f}"


def disambiguate(points):
    """Rows of one model with the same method name get the words of their grid label the others lack."""
    by_name = defaultdict(list)
    for p in points:
        by_name[(p["model"], p["method"])].append(p)
    for same in by_name.values():
        if len(same) < 2:
            continue
        words = [p["label"].split("-") for p in same]
        for p, w in zip(same, words):
            own = [x for x in w if not all(x in other for other in words if other is not w)]
            p["method"] += f" ({'-'.join(own) or p['label']})"


def place_labels(ax, pts, fontsize):
    """Greedy label placement in display space: each label takes the first of a ring of offsets that
    overlaps no label or marker placed so far and stays inside the axes, else the least overlapping one."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    markers = [ax.transData.transform((x, y)) for x, y, _ in pts]
    mbox = [(mx - 5, my - 5, mx + 5, my + 5) for mx, my in markers]
    placed = []
    offsets = [(7, 3), (7, -9), (-7, 3), (-7, -9), (0, 9), (0, -15), (9, 13), (9, -19), (-9, 13), (-9, -19),
               (14, 24), (14, -30), (-14, 24), (-14, -30), (20, 36), (20, -42), (-20, 36), (-20, -42)]

    def overlap(a, b):
        w = min(a[2], b[2]) - max(a[0], b[0])
        h = min(a[3], b[3]) - max(a[1], b[1])
        return w * h if w > 0 and h > 0 else 0

    for i in sorted(range(len(pts)), key=lambda i: -markers[i][1]):
        x, y, text = pts[i]
        best = None
        for dx, dy in offsets:
            ha = "left" if dx > 0 else "right" if dx < 0 else "center"
            far = abs(dx) + abs(dy) > 20
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va="bottom",
                              fontsize=fontsize, bbox={"fc": "white", "ec": "none", "alpha": 0.75, "pad": 0.4},
                              arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.4"} if far else None)
            bb = ann.get_window_extent(renderer)
            box = (bb.x0 - 1, bb.y0 - 1, bb.x1 + 1, bb.y1 + 1)
            outside = (box[0] < frame.x0) or (box[2] > frame.x1) or (box[1] < frame.y0) or (box[3] > frame.y1)
            cost = sum(overlap(box, b) for b in placed) + sum(overlap(box, b) for j, b in enumerate(mbox) if j != i) \
                + (1e6 if outside else 0)
            if best is None or cost < best[0]:
                if best is not None:
                    best[1].remove()
                best = (cost, ann, box)
            else:
                ann.remove()
            if cost == 0:
                break
        placed.append(best[2])


def paper_of(point, points):
    """The grid's name without the model: the stems' common '-…' suffix among the grids of one model."""
    stems = sorted({p["grid"] for p in points if p["model"] == point["model"]})
    if len(stems) < 2:
        return point["grid"]
    tail = stems[0]
    for s in stems[1:]:
        while not s.endswith(tail):
            tail = tail[1:]
    cut = tail.find("-")
    tail = tail[cut:] if cut >= 0 else ""
    return point["grid"].removesuffix(tail) if tail and tail != point["grid"] else point["grid"]


def plot_summary(args):
    if args.length <= 0:
        sys.exit(f"error: --length {args.length}: takes a positive number of tokens")
    if args.threads <= 0:
        sys.exit(f"error: --threads {args.threads}: takes a positive number of threads")
    exclude = set(args.exclude or [])
    points, notes = [], []
    for path in grid_files(args.grids, exclude):
        model, rows = read_grid(path, args.task)
        if model is None:
            notes.append(f"note: {path.name}: no {args.task} perplexity rows, left out")
        points += rows
    if not points:
        sys.exit(f"error: no {args.task} perplexity rows in the grids")
    records = read_speed(args.speed)
    seen, kept = {}, []
    for p in points:
        if p["specs"] is None:
            notes.append(f"note: {p['grid']}: row '{p['label']}' is not in the grid's spec; no policies to match")
        key = (p["model"], p["setting"], tuple(p["specs"] or [p["label"]]))
        if key in seen:
            notes.append(f"note: {p['grid']}:{p['label']} left out: the same policies and setting as "
                         f"{seen[key]['grid']}:{seen[key]['label']}, read first")
            continue
        seen[key] = p
        kept.append(p)
    points = kept
    for p in points:
        p["method"] = method_name(p["specs"]) if p["specs"] else p["label"]
        p["speed"], p["n_speed"] = match_speed(records, p, args.threads, args.length)
    disambiguate(points)
    for note in notes:
        print(note, file=sys.stderr)

    models = sorted({p["model"] for p in points}, key=lambda m: model_order(model_title(m)))
    head = ["method", "model", "ΔPPL %", "speed-up", "mode", "machine (SIMD used)", "95% interval (vs dense)",
            "grid row", "speed record (family, utc, of n)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for m in models:
        for p in sorted((p for p in points if p["model"] == m), key=lambda p: (p["speed"] is None, p["grid"])):
            r = p["speed"]
            ci = f"[{pct(p['lo'])}, {pct(p['hi'])}]" if p["lo"] is not None else "–"
            cells = [p["method"], model_title(m), pct(p["dppl"]),
                     f"{r['speedup']:.2f}" if r else "–", f"{r['mode']} {mode_tag(r)}" if r else "no speed figure",
                     f"{r['machine']} ({r.get('simd_used', '?')})" if r else "–", ci, f"{p['grid']}:{p['label']}",
                     f"{r['family']}, {r['utc']}, of {p['n_speed']}" if r else "–"]
            print("| " + " | ".join(cells) + " |")

    for p in points:
        p["paper"] = paper_of(p, points)
    papers = list(dict.fromkeys(p["paper"] for p in points))
    colors = {g: f"C{i % 10}" for i, g in enumerate(papers)}
    all_x = [p["speed"]["speedup"] for p in points if p["speed"]] + [1.0]
    lo_x, hi_x = min(all_x) / 1.25, max(all_x) * 1.3
    ticks = [t for t in (0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 4) if lo_x <= t <= hi_x]
    if len(ticks) < 4:
        ticks = sorted(ticks + [t for t in (0.8, 0.9, 1.1, 1.2) if lo_x <= t <= hi_x])
    fig, axes = plt.subplots(1, len(models), figsize=(7.2 * len(models), 6.4), squeeze=False)
    for ax, m in zip(axes[0], models):
        drawn = [p for p in points if p["model"] == m and p["speed"]]
        missing = [p for p in points if p["model"] == m and not p["speed"]]
        ys = [p["dppl"] for p in drawn] + [v for p in drawn for v in (p["lo"], p["hi"]) if v is not None]
        for p in drawn:
            x, r = p["speed"]["speedup"], p["speed"]
            err = [[p["dppl"] - p["lo"]], [p["hi"] - p["dppl"]]] if p["lo"] is not None else None
            ax.errorbar([x], [p["dppl"]], yerr=err, fmt=MACHINE_MARKERS.get(r["machine"], "D"),
                        color=colors[p["paper"]], ms=6, capsize=2, lw=0.8, zorder=3)
        ax.axvline(1, color="k", lw=0.8, ls="--")
        ax.axhline(0, color="0.5", lw=0.6)
        ax.set_xscale("log")
        ax.set_xlim(lo_x, hi_x)
        ax.set_xticks(ticks, [f"{t:g}×" for t in ticks])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        top = max(ys + [1.0])
        if top > 50 or min(ys + [0.0]) < -50:
            ax.set_yscale("symlog", linthresh=1, linscale=0.6)
            ax.set_ylim(min(ys + [0.0]) * 1.5 - 0.3, top * 3)
        else:
            ax.set_ylim(min(ys + [0.0]) * 1.2 - 0.3, top * 1.25)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:+g}%" if v else "0"))
        ax.text(1.0, 0.99, " dense speed ", transform=ax.get_xaxis_transform(), fontsize=7, color="0.3",
                ha="left", va="top")
        ax.set_xlabel(f"speed-up over dense ({args.threads} threads; dN = decode after an N context, ppN = prefill "
                      "of N)", fontsize=8)
        ax.set_ylabel(f"{args.task.upper()} perplexity over dense, % (lower is better)", fontsize=9)
        ax.set_title(model_title(m), fontsize=11)
        ax.grid(alpha=0.3, which="both")
        if missing:
            listed = ", ".join(f"{p['method']} {pct(p['dppl'])}%" for p in missing)
            ax.text(0, -0.13, "\n".join(textwrap.wrap(f"no speed figure (no {args.threads}-thread record of these "
                                                       f"policies on this model): {listed}", 110)),
                    transform=ax.transAxes, fontsize=7, va="top", ha="left")
        handles = [matplotlib.lines.Line2D([], [], ls="", marker="o", color=colors[g], label=g)
                   for g in papers if any(p["paper"] == g and p["speed"] for p in drawn)]
        handles += [matplotlib.lines.Line2D([], [], ls="", marker=MACHINE_MARKERS[k], mfc="none", color="k",
                                            label=f"speed from the {v} machine")
                    for k, v in MACHINES.items() if any(p["speed"]["machine"] == k for p in drawn)]
        if handles:
            ax.legend(handles=handles, fontsize=7, loc="upper left", title="grid (colour) / speed's machine (shape)",
                      title_fontsize=7)
    fig.suptitle(f"Quality vs speed of every method: {args.task.upper()} perplexity over dense against speed-up over "
                 "dense", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.canvas.draw()
    for ax, m in zip(axes[0], models):  # labels last: they are placed in the final layout's display space
        place_labels(ax, [(p["speed"]["speedup"], p["dppl"], f"{p['method']} {mode_tag(p['speed'])}")
                          for p in points if p["model"] == m and p["speed"]], fontsize=7)
    n = f"{args.length // 1024}K" if args.length % 1024 == 0 else str(args.length)
    caption = (f"y: {args.task.upper()} perplexity of each grid row over its own grid's dense row (bars: paired 95% "
               "interval, rows paired with dense). x: speed-up over dense of the same policies (options equal, "
               f"profile / predictor files by name without the model's prefix) in {Path(args.speed).name}, "
               f"{args.threads} threads, the engine's own SIMD level, the latest record: decode after {n} tokens of "
               f"context (d{n}) for key selection, eviction and quantized KV; prefill of a {n}-token prompt (pp{n}, "
               "else the nearest length measured) for layer and token skipping. Quality and speed come from "
               "different runs, possibly on different machines.")
    fig.text(0.01, -0.01, "\n".join(textwrap.wrap(caption, 110 * len(models))), fontsize=8, va="top", ha="left")
    fig.savefig(args.output, dpi=args.dpi, bbox_inches="tight")


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
    su = sub.add_parser("summary", help="quality vs speed of every method of every sweep grid, one panel per model")
    su.add_argument("--grids", nargs="+", required=True, help="grid CSVs (tokensieve sweep) or directories of them")
    su.add_argument("--speed", required=True, help="bench/sparse_speed.py's records (JSON lines)")
    su.add_argument("-o", "--output", required=True, help="PNG file")
    su.add_argument("--exclude", action="append", help="leave out this grid (file name or stem; repeatable)")
    su.add_argument("--task", default="c4", help="perplexity task of the grids to draw (default c4)")
    su.add_argument("--threads", type=int, default=2, help="thread count of the speed records (default 2)")
    su.add_argument("--length", type=int, default=8192, help="headline context / prompt length (default 8192)")
    su.add_argument("--dpi", type=int, default=130)
    su.set_defaults(run=plot_summary)
    args = ap.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
