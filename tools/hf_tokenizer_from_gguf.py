#!/usr/bin/env python3
"""Builds the HF `tokenizers.Tokenizer` a GGUF's tokenizer metadata describes, configured the way
the model's original HF tokenizer is, as the reference our tokenizer is checked against.

  gpt2  : byte-level BPE(vocab, merges); the pre-tokenizer follows tokenizer.ggml.pre
          (smollm: Digits(individual) + ByteLevel regex; llama3/qwen2: their Split regex +
          ByteLevel; default/gpt2: ByteLevel regex); ByteLevel decoder.
  llama : SentencePiece BPE with byte fallback; merges derived from the scores as transformers'
          generate_merges does (GGUF/LlamaConverter); normalizer Prepend("▁") + Replace(" ", "▁");
          decoder Replace("▁", " "), ByteFallback, Fuse, Strip(1 leading space).

Control and unknown tokens are added as special tokens, user-defined ones as plain added tokens
(all unnormalized); BOS is added by a post-processor when tokenizer.ggml.add_bos_token says so.
Encode with `encode(text, add_special_tokens=add_bos)`; set `encode_special_tokens = True` to
tokenize special-token text as plain text.

Usage: hf_tokenizer_from_gguf.py MODEL.gguf [TEXT]   (prints the ids of TEXT)
"""
import sys

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

CONTROL, UNKNOWN, USER_DEFINED = 3, 2, 4

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLITS = {"llama3": LLAMA3_SPLIT, "llama-v3": LLAMA3_SPLIT, "llama-bpe": LLAMA3_SPLIT,
          "qwen2": QWEN2_SPLIT, "deepseek-r1-qwen": QWEN2_SPLIT}


def bytes_to_unicode():
    """GPT-2's byte alphabet: printable Latin-1 bytes as themselves, the rest from U+0100 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    extra = iter(range(256, 512))
    return {b: chr(b) if b in printable else chr(next(extra)) for b in range(256)}


_BYTE_OF = {c: b for b, c in bytes_to_unicode().items()}


def unspell(piece):
    """The text of a byte-level piece (pieces never split a character)."""
    return bytes(_BYTE_OF[c] for c in piece).decode("utf-8")


def pre_tokenizer(pre):
    """The HF pre-tokenizer for a tokenizer.ggml.pre name (also used standalone by tests)."""
    if pre == "smollm":
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    if pre in SPLITS:
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(SPLITS[pre]), behavior="isolated"),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if pre in ("", "default", "gpt2"):
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    raise ValueError(f"unsupported tokenizer.ggml.pre {pre!r}")


def read_metadata(path):
    reader = gguf.GGUFReader(path)
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.ggml."):
            value = field.contents()
            meta[key[len("tokenizer.ggml."):]] = value
    return meta


def generate_merges(vocab, scores):
    """transformers.tokenization_utils_base.generate_merges with vocab_scores (SentencePiece):
    every split of a token into two vocabulary tokens, best merged-piece score first."""
    merges = []
    for piece, score in scores.items():
        local = [(piece[:i], piece[i:], score) for i in range(1, len(piece))
                 if piece[:i] in vocab and piece[i:] in vocab]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in merges]


def build(path):
    """(tokenizer, add_bos) for the GGUF at `path`."""
    meta = read_metadata(path)
    tokens = meta["tokens"]
    types = meta.get("token_type") or [1] * len(tokens)
    vocab = {token: i for i, token in enumerate(tokens)}
    kind = meta["model"]
    add_bos = bool(meta.get("add_bos_token", kind == "llama"))
    if kind == "gpt2":
        merges = []
        for m in meta["merges"]:
            space = m.index(" ", 1)
            merges.append((m[:space], m[space + 1:]))
        pre = meta.get("pre", "")
        tok = Tokenizer(models.BPE(vocab, merges, ignore_merges=pre in ("llama3", "llama-v3", "llama-bpe")))
        tok.pre_tokenizer = pre_tokenizer(pre)
        tok.decoder = decoders.ByteLevel()
    elif kind == "llama":
        unk = meta.get("unknown_token_id")
        tok = Tokenizer(models.BPE(vocab, generate_merges(vocab, dict(zip(tokens, meta["scores"]))),
                                   unk_token=tokens[unk] if unk is not None else None,
                                   fuse_unk=True, byte_fallback=True))
        prefix = bool(meta.get("add_space_prefix", True))
        tok.normalizer = normalizers.Sequence(([normalizers.Prepend("\u2581")] if prefix else [])
                                              + [normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
                                        + ([decoders.Strip(" ", 1, 0)] if prefix else []))
    else:
        raise ValueError(f"unsupported tokenizer.ggml.model {kind!r}")

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty in (CONTROL, UNKNOWN)])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, ty in zip(tokens, types) if ty == USER_DEFINED])
    bos = meta.get("bos_token_id")
    if add_bos and bos is not None:
        tok.post_processor = processors.TemplateProcessing(single=f"{tokens[bos]} $A",
                                                           special_tokens=[(tokens[bos], bos)])
    return tok, add_bos


def main():
    tok, add_bos = build(sys.argv[1])
    text = sys.argv[2] if len(sys.argv) > 2 else sys.stdin.read()
    print(tok.encode(text, add_special_tokens=add_bos).ids)


if __name__ == "__main__":
    main()
