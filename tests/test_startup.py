"""Checking a derivation starts in about a second: neither torch (2.5 s to import) nor
sympy (0.7 s) may load on the way to a derivation's verdicts when every claim holds."""
import subprocess
import sys

PROBE = """
import sys
from chunkproof.cli import main
rc = main(["verify", "-q", "derivations/examples/mamba2.py"])
print(rc, "torch" in sys.modules, "sympy" in sys.modules, "triton" in sys.modules)
"""


def test_verify_loads_neither_torch_nor_sympy():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    rc, torch_loaded, sympy_loaded, triton_loaded = out.stdout.split()[-4:]
    assert rc == "0", out.stdout + out.stderr
    assert (torch_loaded, sympy_loaded, triton_loaded) == ("False", "False", "False"), out.stdout
