#!/usr/bin/env bash
# Seeds the GGUF fuzzer: the real stories260K model plus a small file with every metadata value type
# (nested arrays included) and one tiny tensor of every supported storage type, so mutations start
# close to each code path. Output: fuzz/corpus-gguf/ (git-ignored).
# Usage: fuzz/make_corpus.sh [shared_dir]    then    build-fuzz/bin/fuzz_gguf fuzz/corpus-gguf
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shared="${1:-$here/../../shared}"
out="$here/corpus-gguf"
mkdir -p "$out"
install -m 644 "$shared/models/stories260K.gguf" "$out/stories260K.gguf"

python3 - "$shared/models/stories260K.gguf" "$out/mini.gguf" <<'PY'
import sys

import numpy as np
import gguf
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T, GGUFValueType as V

src, dst = sys.argv[1], sys.argv[2]
reader = gguf.GGUFReader(src)
w = gguf.GGUFWriter(dst, "llama")
for name, field in reader.fields.items():
    if name.startswith("GGUF.") or name == "general.architecture":
        continue
    value = field.contents()
    if isinstance(value, list):
        value = value[:16]  # keep the seed small: 16 tokens, scores and types
    w.add_key_value(name, value, field.types[0], field.types[1] if len(field.types) > 1 else None)
w.add_key_value("t.u8", 200, V.UINT8)
w.add_key_value("t.i8", -100, V.INT8)
w.add_key_value("t.u16", 60000, V.UINT16)
w.add_key_value("t.i16", -30000, V.INT16)
w.add_key_value("t.i32", -7, V.INT32)
w.add_key_value("t.u64", 2**63, V.UINT64)
w.add_key_value("t.i64", -(2**62), V.INT64)
w.add_key_value("t.f64", 0.1, V.FLOAT64)
w.add_key_value("t.bool", True, V.BOOL)
w.add_key_value("t.nested", [[1, 2], [3]], V.ARRAY, V.ARRAY)

rng = np.random.default_rng(7)
for qtype in [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K,
              T.Q5_K, T.Q6_K]:
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n = 256
    raw = rng.integers(0, 256, n // block_elems * block_bytes, dtype=np.uint8)
    w.add_tensor(f"t.{qtype.name}", raw.reshape(1, -1), raw_dtype=qtype)  # shape in bytes
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
PY
ls -l "$out"
