#!/usr/bin/env python3
"""Write a random-weight llama GGUF in the Q4_K_M layout at a 1B+ shape, to run the packed K-quant
kernels (and llama.cpp) on a model larger than the project's real ones without downloading one.

    python3 tools/make_random_gguf.py -o /tmp/random-1b-q4_k_m.gguf      # TinyLlama-1.1B's shape
    python3 tools/make_random_gguf.py -o x.gguf --hidden 2048 --layers 16 --ff 5632 --vocab 32000

Layout as llama.cpp's Q4_K_M: Q4_K for token_embd, attn_q/k/output, ffn_gate/up; Q6_K for attn_v,
ffn_down and output; F32 norms. Every block is random bytes (codes, packed scales) with its fp16
super-block scales overwritten by small values, so activations stay finite through the layers. The
tokenizer is GPT-2 style: the 256 byte tokens plus unreachable filler tokens up to --vocab. Nothing
here is meaningful text; the file is for speed and load tests only (never commit it).
"""
import argparse
import sys

import numpy as np

import gguf
from gguf_vocab import byte_alphabet

Q = gguf.GGMLQuantizationType
BLOCK_BYTES = {Q.Q4_K: 144, Q.Q6_K: 210}
# Byte offsets of the fp16 fields (d, dmin) in a block.
HALF_FIELDS = {Q.Q4_K: (0, 2), Q.Q6_K: (208,)}


def random_blocks(rng, qtype, rows, cols, scale):
    n_blocks = cols // 256
    data = rng.integers(0, 256, size=(rows, n_blocks * BLOCK_BYTES[qtype]), dtype=np.uint8)
    blocks = data.reshape(rows, n_blocks, BLOCK_BYTES[qtype])
    for off in HALF_FIELDS[qtype]:
        halves = rng.uniform(0.5 * scale, scale, size=(rows, n_blocks)).astype(np.float16)
        blocks[:, :, off:off + 2] = halves.view(np.uint8).reshape(rows, n_blocks, 2)
    return data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--ff", type=int, default=5632)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.hidden % 256 or a.ff % 256 or a.hidden % a.heads or a.heads % a.kv_heads or a.vocab < 256:
        sys.exit("error: hidden and ff must be multiples of 256, heads must divide hidden, kv-heads divide heads, "
                 "vocab >= 256")
    rng = np.random.default_rng(a.seed)
    d, hd = a.hidden, a.hidden // a.heads
    kv = a.kv_heads * hd
    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name(f"random Q4_K_M llama {d}x{a.layers}")
    w.add_context_length(4096)
    w.add_embedding_length(d)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(a.vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(byte_alphabet() + [f"<filler_{i}>" for i in range(a.vocab - 256)])
    w.add_token_types([gguf.TokenType.NORMAL] * a.vocab)
    w.add_token_merges(["\u0120 \u0120"])  # "ĠĠ" is not a token: never applies
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.add_add_bos_token(False)
    # Scales ~ 1/sqrt(cols) per unit of code spread keep each layer's output near unit size.
    matrix = lambda name, qtype, rows, cols: w.add_tensor(
        name, random_blocks(rng, qtype, rows, cols, 0.05 / np.sqrt(cols)), raw_dtype=qtype)
    matrix("token_embd.weight", Q.Q4_K, a.vocab, d)
    for i in range(a.layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(d, dtype=np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(d, dtype=np.float32))
        matrix(p + "attn_q.weight", Q.Q4_K, d, d)
        matrix(p + "attn_k.weight", Q.Q4_K, kv, d)
        matrix(p + "attn_v.weight", Q.Q6_K, kv, d)
        matrix(p + "attn_output.weight", Q.Q4_K, d, d)
        matrix(p + "ffn_gate.weight", Q.Q4_K, a.ff, d)
        matrix(p + "ffn_up.weight", Q.Q4_K, a.ff, d)
        matrix(p + "ffn_down.weight", Q.Q6_K, d, a.ff)
    w.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    matrix("output.weight", Q.Q6_K, a.vocab, d)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(a.out)


if __name__ == "__main__":
    main()
