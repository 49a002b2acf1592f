"""tools/verdicts.py: the verdict of each paired row follows its interval and the metric's direction."""
import subprocess
import sys

from conftest import ROOT

HEADER = ("policy,sparsity,setting,task,metric,value,stderr,n,seconds,throughput,speedup,attention_fraction,"
          "ffn_fraction,kv_fraction,baseline,diff,diff_lo,diff_hi,mcnemar_p\n")


def test_verdicts_follow_the_interval_and_the_metric(tmp_path):
    data = tmp_path / "sweep.csv"
    data.write_text(HEADER +
                    "dense,0,s,c4,ppl,20,0.1,100,1,100,1,,,,,,,,\n"
                    "a,,s,c4,ppl,19,0.1,100,1,100,1,,,,dense,-1,-1.5,-0.5,\n"   # lower perplexity: better
                    "b,,s,c4,ppl,22,0.1,100,1,100,1,,,,a,3,2,4,\n"              # against a: worse
                    "dense,0,s,piqa,acc,0.6,0.01,50,1,50,1,,,,,,,,\n"
                    "c,,s,piqa,acc,0.58,0.01,50,1,50,1,,,,dense,-0.02,-0.05,0.01,0.3\n"
                    "d,,s,piqa,acc,0.55,0.01,50,1,50,1,,,,dense,-0.05,-0.08,-0.02,0.01\n"
                    "e,,s,piqa,acc,0.65,0.01,50,1,50,1,,,,dense,0.05,0.02,0.08,0.01\n"
                    "f,,s,piqa,acc,0.65,0.01,50,1,50,1,,,,gone,0.05,0.02,0.08,0.01\n")
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "verdicts.py"), str(data)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    rows = {line.split("|")[1].strip(): line for line in out[2:]}
    assert set(rows) == {"a", "b", "c", "d", "e", "f"}  # rows without a comparison are not listed
    assert rows["a"].endswith("| better |") and "| 20 | 19 |" in rows["a"]
    assert rows["b"].endswith("| worse |") and "| 19 | 22 |" in rows["b"]
    assert rows["c"].endswith("| no difference detected |") and "| 0.3 |" in rows["c"]
    assert rows["d"].endswith("| worse |")
    assert rows["e"].endswith("| better |")
    assert "| – | 0.65 |" in rows["f"]  # a baseline row not in the file
