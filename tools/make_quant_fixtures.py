#!/usr/bin/env python3
"""Writes the dequantization fixtures in tests/fixtures/quant/ from the `gguf` Python package.

For each storage type: a few blocks of random raw bytes (fixed seed) whose fp16 scale fields are
replaced by sane finite values, and what `gguf.quants.dequantize` makes of them. Also a table of
float32 -> fp16 conversions by numpy to check float_to_fp16's rounding.

Fixture format (little-endian):
  <TYPE>.bin:     "TSQF", u32 type id, u32 n_blocks, u32 block_bytes, u32 block_elems,
                  raw blocks (n_blocks * block_bytes), float32[n_blocks * block_elems]
  f32_to_f16.bin: "TSHF", u32 n, float32[n], u16[n]

Usage: python3 tools/make_quant_fixtures.py [out_dir]   (default: tests/fixtures/quant)
"""
import pathlib
import struct
import sys

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize

# Byte offsets of the fp16 scale/min fields inside one block (GGUF block layouts).
SCALE_OFFSETS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}


def sane_f16(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random finite fp16 values of either sign, magnitudes 2^-12 .. 2^2."""
    mag = np.exp2(rng.uniform(-12, 2, n))
    sign = rng.choice([-1.0, 1.0], n)
    return (mag * sign).astype(np.float16)


def quant_blocks(rng: np.random.Generator, qtype: T) -> np.ndarray:
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = 8 if block_elems == 32 else 4
    raw = rng.integers(0, 256, (n_blocks, block_bytes), dtype=np.uint8)
    for off in SCALE_OFFSETS[qtype]:
        scales = sane_f16(rng, n_blocks)
        scales[-1] = np.float16(2.0**-20)  # a subnormal scale: exercises fp16 subnormal decoding
        raw[:, off : off + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return raw


def f16_values(rng: np.random.Generator) -> np.ndarray:
    bits = rng.integers(0, 0x10000, 480, dtype=np.uint32).astype(np.uint16)
    bits = bits[(bits & 0x7C00) != 0x7C00]  # NaN/Inf are tested separately (NaN payloads may differ)
    special = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x3C00]
    return np.concatenate([bits, np.array(special, dtype=np.uint16)]).view(np.uint8).reshape(-1, 2)


def bf16_values(rng: np.random.Generator) -> np.ndarray:
    bits = rng.integers(0, 0x10000, 512, dtype=np.uint32).astype(np.uint16)
    return bits.view(np.uint8).reshape(-1, 2)


def write_type(out: pathlib.Path, qtype: T, raw: np.ndarray) -> None:
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    values = dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
    n_blocks = raw.shape[0]
    assert raw.shape[1] == block_bytes and values.size == n_blocks * block_elems
    head = b"TSQF" + struct.pack("<4I", qtype.value, n_blocks, block_bytes, block_elems)
    (out / f"{qtype.name}.bin").write_bytes(head + raw.tobytes() + values.astype("<f4").tobytes())


def f32_inputs(rng: np.random.Generator) -> np.ndarray:
    """Floats across the whole fp16 range, including exact ties between neighbouring halves."""
    mags = np.exp2(rng.uniform(-27, 17, 1024)).astype(np.float32)
    signs = rng.choice(np.array([-1, 1], dtype=np.float32), 1024)
    lo = rng.integers(0, 0x7BFF, 512, dtype=np.uint32).astype(np.uint16)
    a = lo.view(np.float16).astype(np.float64)
    b = (lo + 1).astype(np.uint16).view(np.float16).astype(np.float64)
    ties = ((a + b) / 2).astype(np.float32)  # exact: a tie needs only 12 significant bits
    edges = np.array([65504, 65519.99, 65520, 65536, 2.0**-24, 2.0**-25, 2.0**-25 * 1.0001, 2.0**-14,
                      2.0**-14 * (1 - 2.0**-12), 1e-30, 0.0, -0.0, np.inf, -np.inf], dtype=np.float32)
    return np.concatenate([mags * signs, ties, -ties, edges]).astype(np.float32)


def main() -> None:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/quant")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20240611)
    for qtype in SCALE_OFFSETS:
        write_type(out, qtype, quant_blocks(rng, qtype))
    write_type(out, T.F16, f16_values(rng))
    write_type(out, T.BF16, bf16_values(rng))

    xs = f32_inputs(rng)
    with np.errstate(over="ignore"):
        hs = xs.astype(np.float16).view(np.uint16)
    body = xs.astype("<f4").tobytes() + hs.astype("<u2").tobytes()
    (out / "f32_to_f16.bin").write_bytes(b"TSHF" + struct.pack("<I", xs.size) + body)
    total = sum(p.stat().st_size for p in out.glob("*.bin"))
    print(f"wrote {len(list(out.glob('*.bin')))} fixtures, {total} bytes, to {out}")


if __name__ == "__main__":
    main()
