#!/usr/bin/env python3
"""WikiText-2 perplexity of a GGUF model with llama.cpp (via llama-cpp-python), following the protocol of
llama.cpp's `llama-perplexity` (tools/perplexity/perplexity.cpp, function `perplexity`, ppl_stride = 0):

  * the whole file is read as bytes; one trailing '\\n' is dropped (as `-f` does in common/arg.cpp);
  * the whole text is tokenized once with add_special = true, parse_special = false, i.e. a BOS token is
    prepended iff the vocabulary's add-BOS flag is set (`common_tokenize(ctx, prompt, true)`);
  * n_chunk = min(--chunks, n_tokens // n_ctx); chunk i is tokens[i*n_ctx : (i+1)*n_ctx], evaluated from an
    empty KV cache at positions 0..n_ctx-1; if the vocabulary adds BOS, the first token of every chunk is
    replaced by BOS for the evaluation;
  * only the second half is scored: with first = n_ctx // 2, the logits at positions j = first .. n_ctx-2
    predict token j+1, so each chunk contributes n_ctx - first - 1 negative log-likelihoods
    nll = logsumexp(logits) - logits[target];
  * PPL = exp(mean nll); the printed uncertainty is llama.cpp's: sqrt((mean(nll^2) - mean(nll)^2)/(count-1)) * PPL.

Output mimics llama-perplexity: a running "[i]ppl," line, then "Final estimate: PPL = x +/- y".

Usage:
    python3 tools/llamacpp_ppl.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf -c 512 -t 2 [--chunks N] [--json out.json]

--mode lowlevel (default) builds one llama_batch per chunk that requests logits only for the scored half,
as llama-perplexity does; --mode eval uses Llama(logits_all=True).eval() and slices llm.scores instead
(slower, same numbers up to float rounding).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import importlib.metadata as _im
import json
import math
import os
import sys
import time

import numpy as np

DEFAULT_DATA = "/work/shared/data/wikitext2/wiki.test.raw"


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def nll_rows(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """-log softmax(logits)[target] per row, computed in float64."""
    x = logits.astype(np.float64, copy=False)
    m = x.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(x - m).sum(axis=1))
    return lse - x[np.arange(len(targets)), targets]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True, help="GGUF model")
    ap.add_argument("-f", "--file", default=DEFAULT_DATA, help=f"raw text (default {DEFAULT_DATA})")
    ap.add_argument("-c", "--ctx", type=int, default=512, help="context / chunk length (default 512)")
    ap.add_argument("--chunks", type=int, default=-1, help="max number of chunks (default all)")
    ap.add_argument("-t", "--threads", type=int, default=2, help="threads (default 2)")
    ap.add_argument("--mode", choices=("lowlevel", "eval"), default="lowlevel")
    ap.add_argument("--flash-attn", action="store_true", help="enable llama.cpp flash attention (default off)")
    ap.add_argument("--json", help="write a JSON summary to this path ('-' = stdout)")
    args = ap.parse_args()

    import llama_cpp

    n_ctx = args.ctx
    t_start = time.time()
    llm = llama_cpp.Llama(
        model_path=args.model,
        n_ctx=n_ctx,
        n_batch=n_ctx,
        n_ubatch=n_ctx,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        logits_all=(args.mode == "eval"),
        flash_attn=args.flash_attn,
        verbose=False,
    )
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
    bos = int(llama_cpp.llama_vocab_bos(vocab))
    n_vocab = llm.n_vocab()

    with open(args.file, "rb") as f:
        text = f.read()
    if text.endswith(b"\n"):
        text = text[:-1]
    t0 = time.time()
    tokens = np.array(llm.tokenize(text, add_bos=True, special=False), dtype=np.int32)
    t_tok = time.time() - t0
    print(f"tokenized {args.file}: {len(tokens)} tokens in {t_tok:.1f} s (add_bos={add_bos}, bos={bos})",
          file=sys.stderr)

    if len(tokens) < 2 * n_ctx:
        print(f"need at least {2 * n_ctx} tokens, have {len(tokens)}", file=sys.stderr)
        return 1
    n_chunk_max = len(tokens) // n_ctx
    n_chunk = n_chunk_max if args.chunks < 0 else min(args.chunks, n_chunk_max)
    first = n_ctx // 2
    print(f"calculating perplexity over {n_chunk} chunks, n_ctx={n_ctx}, scoring {n_ctx - first - 1} tokens/chunk,"
          f" threads={args.threads}, mode={args.mode}", file=sys.stderr)

    ctx = llm.ctx
    batch = None
    if args.mode == "lowlevel":
        batch = llama_cpp.llama_batch_init(n_ctx, 0, 1)

    nll_sum = 0.0
    nll2_sum = 0.0
    count = 0
    t_eval0 = time.time()
    for i in range(n_chunk):
        start = i * n_ctx
        chunk = tokens[start:start + n_ctx].copy()
        if add_bos:
            chunk[0] = bos
        targets = tokens[start + first + 1:start + n_ctx]  # original tokens (the BOS swap only affects input 0)
        if args.mode == "lowlevel":
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
            for k in range(n_ctx):
                batch.token[k] = int(chunk[k])
                batch.pos[k] = k
                batch.n_seq_id[k] = 1
                batch.seq_id[k][0] = 0
                batch.logits[k] = 1 if k >= first else 0
            batch.n_tokens = n_ctx
            rc = llama_cpp.llama_decode(ctx, batch)
            if rc != 0:
                print(f"llama_decode failed: {rc}", file=sys.stderr)
                return 1
            n_out = n_ctx - first
            ptr = llama_cpp.llama_get_logits(ctx)
            logits = np.ctypeslib.as_array(ptr, shape=(n_out * n_vocab,)).reshape(n_out, n_vocab)
            rows = logits[: n_out - 1]
        else:
            llm.reset()
            llm.eval(chunk.tolist())
            rows = np.asarray(llm.scores[first:n_ctx - 1])
        v = nll_rows(rows, targets)
        nll_sum += float(v.sum())
        nll2_sum += float((v * v).sum())
        count += len(v)
        if i == 0:
            dt = time.time() - t_eval0
            print(f"{dt:.2f} seconds per pass - ETA {dt * n_chunk / 60:.2f} minutes", file=sys.stderr)
        print(f"[{i + 1}]{math.exp(nll_sum / count):.4f},", end="", flush=True)
    print()
    if batch is not None:
        llama_cpp.llama_batch_free(batch)

    mean = nll_sum / count
    ppl = math.exp(mean)
    var = nll2_sum / count - mean * mean
    stderr = math.sqrt(var / (count - 1)) * ppl if var > 0 else float("nan")
    seconds = time.time() - t_start
    print(f"Final estimate: PPL = {ppl:.4f} +/- {stderr:.5f}")
    print(f"tokens_scored={count} n_chunks={n_chunk} n_ctx={n_ctx} seconds={seconds:.1f}", file=sys.stderr)

    if args.json:
        try:
            llama_cpp_version = _im.version("llama_cpp_python")
        except _im.PackageNotFoundError:
            llama_cpp_version = getattr(llama_cpp, "__version__", None)
        summary = {
            "ppl": ppl,
            "ppl_stderr": stderr,
            "tokens_scored": count,
            "n_chunks": n_chunk,
            "n_ctx": n_ctx,
            "n_tokens_file": int(len(tokens)),
            "mean_nll": mean,
            "add_bos": add_bos,
            "model": os.path.basename(args.model),
            "model_sha256": sha256_file(args.model),
            "data": os.path.basename(args.file),
            "data_sha256": sha256_file(args.file),
            "threads": args.threads,
            "mode": args.mode,
            "flash_attn": args.flash_attn,
            "llama_cpp_python": llama_cpp_version,
            "seconds": round(seconds, 1),
            "command": "python3 " + " ".join(sys.argv),
        }
        text_out = json.dumps(summary, indent=2)
        if args.json == "-":
            print(text_out)
        else:
            with open(args.json, "w") as f:
                f.write(text_out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
