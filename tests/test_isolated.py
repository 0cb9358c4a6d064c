"""chunkproof.bench.isolated: the probe scripts' one-process-per-case runner."""
import sys

from chunkproof.bench.isolated import run_isolated, split_tool


def test_a_tool_prefix_names_a_sanitizer_tool():
    assert split_tool("san:B=1 T=2") == ("memcheck", "B=1 T=2")
    assert split_tool("init:x") == ("initcheck", "x") and split_tool("race:x") == ("racecheck", "x")
    assert split_tool("B=1 T=2 | BV=32") == (None, "B=1 T=2 | BV=32")
    assert split_tool("grad_BK:64") == (None, "grad_BK:64")


def test_each_case_runs_alone_with_blocking_launches_and_a_limit():
    text, rc = run_isolated([sys.executable, "-c", "import os; print(os.environ['CUDA_LAUNCH_BLOCKING'])"])
    assert (text.strip(), rc) == ("1", 0)
    text, rc = run_isolated([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert rc == 3
    text, rc = run_isolated([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"],
                            timeout=3)
    assert rc == "timeout" and "started" in text and "(timed out)" in text
