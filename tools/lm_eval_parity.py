#!/usr/bin/env python3
"""Runs lm-evaluation-harness (its own task configs, prompts and scoring) on a GGUF model, reading the
same local data files as `tokensieve eval`, as the independent reference for docs/results/eval_parity.md.

Model: transformers loads the GGUF (`AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)`, every
tensor dequantized to float32) and lm-eval's HF backend (`HFLM`) scores it in float32 on the CPU.

Tokenizer: the HF `tokenizers` tokenizer that tools/hf_tokenizer_from_gguf.py builds from the same GGUF
(checked against our tokenizer elsewhere). transformers' own GGUF tokenizer loader is not used because
for SmolLM2 it drops the pre-tokenizer's digit splitter, so numbers would tokenize differently from the
original HF tokenizer. BOS is added exactly when the GGUF says so (lm-eval's default is the tokenizer's).

Data: lm-eval would download each task's Hugging Face dataset; here `datasets.load_dataset` is replaced
by a function that builds the same Hugging Face schema from the files in the data directory, so both
sides see identical documents in identical order and `--limit N` picks the same first N:

  piqa            baber/piqa                   <- piqa/original/valid.jsonl + valid-labels.lst
  arc_easy        allenai/ai2_arc ARC-Easy     <- arc/original/ARC-Easy-Test.jsonl
  arc_challenge   allenai/ai2_arc ARC-Challenge<- arc/original/ARC-Challenge-Test.jsonl
  hellaswag       Rowan/hellaswag              <- hellaswag/hellaswag_val.random1000.orig.jsonl
  winogrande      allenai/winogrande xl        <- winogrande/original/dev.jsonl + dev-labels.lst
  boolq           aps/super_glue boolq         <- boolq/boolq_validation.llmfoundry.jsonl, query
                                                  "Passage: {passage}\\nQuestion: {question}?" split back
                                                  (the passage lacks super_glue's "Title -- " prefix)

Usage:
  tools/lm_eval_parity.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --tasks piqa,boolq --limit 500 \\
      --out /tmp/lm_eval_piqa_boolq.json [--data-dir ../shared/data] [--batch-size 8] [--samples DIR]
Prints and writes {"<task>": {"acc", "acc_norm", "acc_stderr", "n"}} (acc_norm null where the task has none).
"""
import argparse
import json
import os
import sys

import datasets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_tokenizer_from_gguf  # noqa: E402

def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_labels(path):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def piqa_rows(d):
    rows = read_jsonl(f"{d}/piqa/original/valid.jsonl")
    labels = read_labels(f"{d}/piqa/original/valid-labels.lst")
    return [{"goal": r["goal"], "sol1": r["sol1"], "sol2": r["sol2"], "label": int(l)} for r, l in zip(rows, labels, strict=True)]


def arc_rows(d, name):
    file = {"ARC-Easy": "ARC-Easy-Test.jsonl", "ARC-Challenge": "ARC-Challenge-Test.jsonl"}[name]
    return [{"id": r["id"], "question": r["question"]["stem"],
             "choices": {"text": [c["text"] for c in r["question"]["choices"]],
                         "label": [c["label"] for c in r["question"]["choices"]]},
             "answerKey": r["answerKey"]} for r in read_jsonl(f"{d}/arc/original/{file}")]


def hellaswag_rows(d):
    keys = ("ind", "activity_label", "ctx_a", "ctx_b", "ctx", "endings", "source_id", "split", "split_type")
    return [{**{k: r[k] for k in keys}, "label": str(r["label"])}
            for r in read_jsonl(f"{d}/hellaswag/hellaswag_val.random1000.orig.jsonl")]


def winogrande_rows(d):
    rows = read_jsonl(f"{d}/winogrande/original/dev.jsonl")
    labels = read_labels(f"{d}/winogrande/original/dev-labels.lst")
    return [{"sentence": r["sentence"], "option1": r["option1"], "option2": r["option2"], "answer": l}
            for r, l in zip(rows, labels, strict=True)]


def boolq_rows(d):
    out = []
    for i, r in enumerate(read_jsonl(f"{d}/boolq/boolq_validation.llmfoundry.jsonl")):
        q = r["query"]
        assert q.startswith("Passage: ") and q.endswith("?") and r["choices"] == ["no", "yes"], r
        cut = q.rindex("\nQuestion: ")
        out.append({"question": q[cut + len("\nQuestion: "):-1], "passage": q[len("Passage: "):cut], "idx": i,
                    "label": r["gold"]})
    return out


def local_dataset(data_dir, path, name):
    rows = {
        ("baber/piqa", None): lambda: piqa_rows(data_dir),
        ("allenai/ai2_arc", "ARC-Easy"): lambda: arc_rows(data_dir, "ARC-Easy"),
        ("allenai/ai2_arc", "ARC-Challenge"): lambda: arc_rows(data_dir, "ARC-Challenge"),
        ("Rowan/hellaswag", None): lambda: hellaswag_rows(data_dir),
        ("allenai/winogrande", "winogrande_xl"): lambda: winogrande_rows(data_dir),
        ("aps/super_glue", "boolq"): lambda: boolq_rows(data_dir),
    }[(path, name)]()
    ds = datasets.Dataset.from_list(rows)
    # lm-eval evaluates the test split when the task has one (ARC), else validation; it builds its
    # (here unused, zero-shot) few-shot sampler from train.
    return datasets.DatasetDict({"train": ds.select(range(1)), "validation": ds, "test": ds})


def load_tokenizer(gguf_path):
    from transformers import PreTrainedTokenizerFast

    tok, _add_bos = hf_tokenizer_from_gguf.build(gguf_path)
    meta = hf_tokenizer_from_gguf.read_metadata(gguf_path)
    names = {k: meta["tokens"][meta[f"{k}_token_id"]] for k in ("bos", "eos") if f"{k}_token_id" in meta}
    # The post-processor adds BOS when the GGUF says so; add_special_tokens=True (lm-eval's default) applies it.
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=names.get("bos"), eos_token=names.get("eos"))


def load_model(gguf_path):
    import torch  # here, so the dataset loader is usable without torch (tests/python/test_server_lm_eval.py)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(gguf_path)),
                                                 gguf_file=os.path.basename(gguf_path), dtype=torch.float32)
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tasks", required=True, help="comma-separated lm-eval task names")
    ap.add_argument("--data-dir", default=os.environ.get("TS_DATA_DIR", "../shared/data"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", help="directory for lm-eval's per-document log-likelihoods (jsonl per task)")
    args = ap.parse_args()

    import lm_eval
    from lm_eval.models.huggingface import HFLM

    data_dir = os.path.abspath(args.data_dir)
    datasets.load_dataset = lambda path, name=None, **_: local_dataset(data_dir, path, name)
    lm = HFLM(pretrained=load_model(args.model), tokenizer=load_tokenizer(args.model), batch_size=args.batch_size,
              device="cpu")
    tasks = args.tasks.split(",")
    out = lm_eval.simple_evaluate(model=lm, tasks=tasks, num_fewshot=0, limit=args.limit,
                                  log_samples=bool(args.samples))
    summary = {}
    for t in tasks:
        r = out["results"][t]
        summary[t] = {"acc": r["acc,none"], "acc_norm": r.get("acc_norm,none"), "acc_stderr": r["acc_stderr,none"],
                      "n": out["n-samples"][t]["effective"]}
        if args.samples:
            os.makedirs(args.samples, exist_ok=True)
            with open(os.path.join(args.samples, f"{t}.jsonl"), "w") as f:
                for s in out["samples"][t]:
                    f.write(json.dumps({"doc_id": s["doc_id"], "lls": [float(x[0]) for x in s["filtered_resps"]],
                                        "args": s["arguments"]}) + "\n")
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
