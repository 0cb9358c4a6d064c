import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.cuda_context import pytest_runtest_makereport, pytest_runtest_protocol  # noqa: E402, F401 (hooks)

# Under pytest-xdist the workers already fill the cores: OpenBLAS's pool (numpy, and so
# the Triton interpreter's products) and torch's would put several spinning threads on
# each.  OpenBLAS reads its variable when numpy loads; the variables are removed again
# so that subprocesses (the CLI's own threading is under test) start with the defaults.
ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _xdist_controller(config):
    """This process hands the tests to xdist workers and runs none itself."""
    return (config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None))
            and not config.getoption("collectonly") and not hasattr(config, "workerinput"))


def pytest_configure(config):
    if _xdist_controller(config):
        return   # it need not import torch
    worker = bool(os.environ.get("PYTEST_XDIST_WORKER"))
    set_here = [v for v in ONE_THREAD if worker and v not in os.environ]
    for v in set_here:
        os.environ[v] = "1"
    import numpy  # noqa: F401
    import torch
    if worker:
        torch.set_num_threads(1)
    for v in set_here:
        del os.environ[v]
    # Kernels run under Triton's interpreter unless a GPU is here (`pytest -m gpu` on
    # the lent machine).  The variable must be set before triton is first imported.
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(scope="session", autouse=True)
def _verdicts_shared_by_the_workers(tmp_path_factory):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    from tests import helpers
    # the workers' temporary folders sit side by side in one folder of this run
    shared = tmp_path_factory.getbasetemp().parent / "verdicts"
    shared.mkdir(exist_ok=True)
    helpers.SHARED_DIR = str(shared)
    yield
    helpers.SHARED_DIR = None


@pytest.fixture
def fake_gpu(monkeypatch):
    """fake_gpu(*majors): torch.cuda reports GPUs of these compute capabilities (index i:
    majors[i]; the current one: 0), and the runtime's Hopper answers kept per device start
    empty, so the faked capability is what it reads.  Returns the indices it was asked
    about, in order."""
    import importlib

    import torch
    rt = importlib.import_module("chunkproof.kernels._runtime")
    asked = []

    def fake(*majors):
        def capability(device=None):
            asked.append(device)
            return majors[device or 0], 0
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
        monkeypatch.setattr(rt, "_HOPPER", {})
        return asked
    return fake
