"""Documents generated from the code stay current."""
import subprocess
import sys

from conftest import ROOT


def test_readme_policy_table_is_the_registrys(ts_bin):
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "readme_policies.py"), "--bin", str(ts_bin), "--check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
