#!/usr/bin/env python3
"""Writes tests/fixtures/eval/rouge_l.json: ROUGE-L of fixed (reference, prediction) pairs computed by
Google's rouge-score package (RougeScorer(["rougeL"]), no stemming), the reference implementation
tests/unit/test_eval_rouge.cpp checks src/eval/rouge.cpp against. Needs `pip install rouge-score`.
Usage: tools/make_rouge_fixture.py [OUT]"""
import json
import pathlib
import sys

from rouge_score import rouge_scorer

PAIRS = [
    ("the cat sat on the mat", "the cat sat on the mat"),
    ("the cat sat on the mat", "on the mat the cat sat"),
    ("police arrested 12 protesters near City Hall on Sunday.",
     "On Sunday, police arrested twelve protesters at city hall."),
    ("Hello, WORLD! It's 2024 -- isn't it?", "hello world its 2024 isnt it"),
    ("a b c d e f g", "g f e d c b a"),
    ("a a a b b", "a b a b a b"),
    ("Café society: naïve résumé writers", "cafe society naive resume writers"),
    ("", "something"),
    ("something", "!!! ..."),
    ("The Occupy LA encampment got a stay of execution this morning, though a few arrests have been "
     "reported beyond the boundaries of City Hall Park.",
     "Occupy LA protesters stayed at City Hall Park this morning despite the mayor's order; a few "
     "arrests were reported outside the park."),
]


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                       pathlib.Path(__file__).resolve().parents[1] / "tests/fixtures/eval/rouge_l.json")
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    rows = []
    for ref, pred in PAIRS:
        s = scorer.score(ref, pred)["rougeL"]
        rows.append({"reference": ref, "prediction": pred, "precision": s.precision, "recall": s.recall,
                     "f": s.fmeasure})
    out.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
