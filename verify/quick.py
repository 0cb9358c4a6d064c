"""Developer aid: print the verdict of every claim of some derivations.

    python -m verify.quick derivations/kda.py [claim-id-substring]
"""
import sys

from .check import check
from .loader import bundled, from_file

if __name__ == "__main__":
    target = sys.argv[1]
    pat = sys.argv[2] if len(sys.argv) > 2 else ""
    ds = from_file(target) if target.endswith(".py") else bundled([target])
    for d in ds:
        for c in d.claims:
            if pat and pat not in c.id:
                continue
            r = check(d, c)
            extra = r.message or (f"smallest {r.smallest}; {r.residual}" if r.verdict == "fails" else "")
            print(f"{r.verdict:10s} {c.id:40s} {r.seconds:6.2f}s float={r.float_error} {extra}")
