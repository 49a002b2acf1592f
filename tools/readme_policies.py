#!/usr/bin/env python3
"""Writes README.md's policy table from the policies' own declarations (`tokensieve policies --json`),
between the <!-- policies:begin --> and <!-- policies:end --> markers. --check exits 1 when the
README's table differs (the test suite runs it), printing the table it expects.

Usage: tools/readme_policies.py [--bin build/bin/tokensieve] [--check]
"""
import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- policies:begin -->", "<!-- policies:end -->"


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(entries: list) -> str:
    rows = ["| policy | Python class | options (defaults) | what |", "|---|---|---|---|"]
    for e in entries:
        opts = ", ".join(f"`{cell(o['usage'])}`" for o in e["options"])
        rows.append(f"| `{e['name']}` | `{e['class']}` | {opts} | {cell(e['summary'])} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "bin" / "tokensieve"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    entries = json.loads(subprocess.run([args.bin, "policies", "--json"], capture_output=True, text=True,
                                        check=True).stdout)
    readme = ROOT / "README.md"
    text = readme.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    want = "\n" + table(entries) + "\n"
    if args.check:
        if text[start:end] != want:
            print(f"README.md's policy table is not the registry's; run tools/readme_policies.py:\n{want}")
            return 1
        return 0
    readme.write_text(text[:start] + want + text[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
