"""profile_kernels.py on the bundled modules with their loads moved to first use
(loads_at_use.py), each put in place of chunkproof.kernels.<variant> for this process.

    python profile_moved.py VARIANT[,VARIANT] -- <profile_kernels.py arguments, --variants excluded>
"""
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../../../.."))
sys.path[:0] = [HERE, os.path.join(ROOT, "benchmarks")]
import chunkproof.kernels  # noqa: E402
from loads_at_use import move_loads  # noqa: E402
import profile_kernels  # noqa: E402

names = sys.argv[1].split(",")
tmp = tempfile.mkdtemp()
for v in names:
    src = open(os.path.join(ROOT, "generated_kernels", v + ".py"), encoding="utf-8").read()
    path = os.path.join(tmp, v + ".py")
    open(path, "w", encoding="utf-8").write(move_loads(src))
    name = f"chunkproof.kernels.{v}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    setattr(chunkproof.kernels, v, mod)
profile_kernels.main(["--variants", sys.argv[1]] + sys.argv[3:])
