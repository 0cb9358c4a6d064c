"""tests/cuda_context.py: a test that loses the CUDA context (an illegal memory access)
fails alone; the tests after it run in a fresh process (xdist) or not at all, with the
reason (a lone run), instead of each failing with the same error."""
import os

import pytest

pytest_plugins = ["pytester"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = """
def test_a(): pass
def test_lost(): raise RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered")
def test_b(): pass
def test_c(): pass
def test_other_failure(): assert False, "some other error"
"""


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ROOT)
    pytester.makeconftest("from tests.cuda_context import pytest_runtest_makereport, pytest_runtest_protocol\n")
    pytester.makepyfile(test_ctx=TESTS)
    return pytester


def test_under_xdist_the_worker_ends_and_the_rest_run(project):
    r = project.runpytest_subprocess("-p", "xdist", "-n", "1", "-p", "no:cacheprovider")
    out = r.stdout.str()
    assert "test_ctx.py::test_lost" in out and "crashed" in out, out
    # test_lost is reported twice: its failure, then the worker it ended
    r.assert_outcomes(passed=3, failed=3)


def test_alone_the_run_stops_with_the_reason(project):
    r = project.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    out = r.stdout.str()
    assert "test_ctx.py::test_lost lost the CUDA context" in out, out
    r.assert_outcomes(passed=1, failed=1)
