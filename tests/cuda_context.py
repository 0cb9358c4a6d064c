"""Hooks of the test run (registered by tests/conftest.py)."""
import os
import time

import pytest


# An illegal memory access ends the CUDA context of the process it happens in: every later
# GPU test there would fail with the same error and say nothing of its own.  The test that
# met it fails as usual; then an xdist worker ends (xdist reports the test as having
# crashed its worker and starts a fresh one for the rest), a lone run stops saying why.
LOST_CONTEXT = "an illegal memory access was encountered"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and LOST_CONTEXT in report.longreprtext:
        item.cuda_context_lost = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield
    if not getattr(item, "cuda_context_lost", False):
        return
    if hasattr(item.config, "workerinput"):       # an xdist worker
        time.sleep(1)          # the failure's report on its way to the controller first
        os._exit(3)
    pytest.exit(f"{item.nodeid} lost the CUDA context (illegal memory access); the later GPU tests cannot run "
                f"in this process", returncode=1)
