"""`chunkproof bench` on the CPU: the whole pipeline under Triton's interpreter at a tiny
shape, the correctness gate refusing a wrong output (ours and FLA's), FLA's refusals and
dispatch as recorded, the JSON's keys, and bad input (one line, exit code 2).  FLA is
not installed on CI: a small stand-in package (below) plays it, wrapping our kernel."""
import json
import logging
import os
import sys
import textwrap

import pytest
import torch

from chunkproof import cli

ROW_KEYS = ["variant", "mode", "B", "T", "H", "D", "dtype", "ours_ms", "fla_ms", "fla_backend", "sdpa_ms",
            "floor_ms", "ours_peak_mib", "fla_peak_mib", "max_rel_err_ours", "max_rel_err_fla", "gpu", "torch",
            "triton", "fla_version", "date"]
TINY = ["--interpret", "--shapes", "1x64x2x16"]

interpreter = pytest.mark.skipif(torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
                                 reason="Triton's interpreter is set before triton is imported (CPU runs)")


def bench(capsys, *argv):
    code = cli.main(["bench", *TINY, "-q", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@interpreter
def test_interpreter_end_to_end_writes_the_rows_and_the_table(capsys, tmp_path):
    path = tmp_path / "latest.json"
    # a gate on the first 32 of the 64 steps: the prefix call, and the full call's o there
    code, out, _ = bench(capsys, "--variant", "gla", "--no-fla", "--gate-t", "32", "-o", str(path))
    assert code == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] and doc["meta"]["interpreter"]
    assert [(r["variant"], r["mode"]) for r in doc["rows"]] == [("gla", "fwd"), ("gla", "fwd+bwd")]
    for row, det in zip(doc["rows"], doc["details"]):
        assert list(row) == ROW_KEYS
        assert (row["B"], row["T"], row["H"], row["D"], row["dtype"]) == (1, 64, 2, 16, "bf16")
        assert row["ours_ms"] > 0 and row["sdpa_ms"] > 0 and row["floor_ms"] > 0
        assert 0 < row["max_rel_err_ours"] < 5e-2 and row["fla_ms"] is None
        assert "interpreter" in row["gpu"] and det["gate"] == {"ours": "pass"} and det["gate_steps"] == 32
    bwd = doc["details"][1]["errors"]["ours"]
    assert {"o", "final_state", "o (full-length call, first t steps)", "dq", "dk", "dv", "dg",
            "dinitial_state"} <= set(bwd)
    assert "meaningless" in out and "| gla | fwd+bwd | 1, 64, 2, 16 |" in out


@interpreter
def test_a_variant_with_a_parameter_argument_is_benched_and_gated(capsys, tmp_path):
    # RWKV-6's u is [H, K], not per step: drawn at that shape, kept whole by the gate's
    # prefix slice, and its gradient checked with the rest
    path = tmp_path / "latest.json"
    code, _, _ = bench(capsys, "--variant", "rwkv6", "--no-fla", "--no-sdpa", "--gate-t", "32", "-o", str(path))
    assert code == 0
    doc = json.loads(path.read_text())
    assert [r["mode"] for r in doc["rows"]] == ["fwd", "fwd+bwd"]
    assert all(d["gate"] == {"ours": "pass"} for d in doc["details"])
    assert "du" in doc["details"][1]["errors"]["ours"]


@interpreter
def test_the_gate_refuses_a_perturbed_output_and_times_nothing(capsys, tmp_path, monkeypatch):
    from chunkproof.bench import runner

    def perturb(side, mode, outs, grads):
        outs["o"] = outs["o"] * 1.2
    monkeypatch.setattr(runner, "PERTURB", perturb)
    path = tmp_path / "r.json"
    code, out, _ = bench(capsys, "--variant", "gla", "--mode", "fwd", "--no-fla", "--no-sdpa", "-o", str(path))
    assert code == 1
    (row,), (det,) = json.loads(path.read_text())["rows"], json.loads(path.read_text())["details"]
    assert row["ours_ms"] is None and row["max_rel_err_ours"] > 0.1
    assert det["gate"]["ours"] == "fail" and "failed the correctness gate" in det["notes"][0]
    assert "FAIL" in out


@interpreter
def test_a_lost_cuda_context_ends_the_run_with_notes_not_a_traceback(capsys, tmp_path, monkeypatch):
    # an illegal memory access ends the process's CUDA context: every later CUDA call
    # raises it again (torch.cuda.empty_cache included), so the bench notes it, runs
    # nothing more in that process, and still writes every row
    from chunkproof.bench import runner

    class AcceleratorError(RuntimeError):
        pass

    def lose(side, mode, outs, grads):
        raise AcceleratorError("CUDA error: an illegal memory access was encountered")
    monkeypatch.setattr(runner, "PERTURB", lose)
    path = tmp_path / "r.json"
    code, _, err = bench(capsys, "--variant", "gla,retention", "--no-fla", "-o", str(path))
    assert code == 1 and "Traceback" not in err
    doc = json.loads(path.read_text())
    assert [(r["variant"], r["mode"]) for r in doc["rows"]] == [("gla", "fwd"), ("gla", "fwd+bwd"),
                                                                ("retention", "fwd"), ("retention", "fwd+bwd")]
    assert all(r["ours_ms"] is None and r["sdpa_ms"] is None for r in doc["rows"])
    first, *rest = [d["notes"] for d in doc["details"]]
    assert "illegal memory access" in first[0] and "an earlier call ended this process's CUDA context" in first[1]
    assert all("an earlier call ended this process's CUDA context" in n[0] for n in rest)


FAKE_FLA = {
    "fla/__init__.py": "",
    "fla/ops/__init__.py": "",
    "fla/ops/common/__init__.py": "",
    "fla/ops/common/chunk_o.py": "TRITON_ABOVE_3_7_1 = False\n",
    "fla/backends.py": """
        import logging
        logger = logging.getLogger(__name__)

        class _Registry:
            def __init__(self):
                self._logged = set()

        _operation_registries = {"gla": _Registry()}
    """,
    "fla/ops/gla/__init__.py": """
        import torch
        from fla import backends
        from fla.ops.common import chunk_o
        from chunkproof.kernels import chunk_gla as _ours
        O_FACTOR = 1.0

        class _Refuse(torch.autograd.Function):
            @staticmethod
            def forward(ctx, o):
                return o.view_as(o)

            @staticmethod
            def backward(ctx, do):
                if not chunk_o.TRITON_ABOVE_3_7_1:
                    raise RuntimeError("Triton >= 3.4.0 and < 3.7.1 on Hopper GPUs produces incorrect "
                                       "results for gated chunk_bwd_dqkwg (see #640).")
                return do

        def chunk_gla(q, k, v, g, **kw):
            reg = backends._operation_registries["gla"]
            if "gla:chunk_gla" not in reg._logged:   # FLA logs each dispatch once per process
                reg._logged.add("gla:chunk_gla")
                backends.logger.info("[FLA Backend] gla.chunk_gla -> standin")
            o, ht = _ours(q, k, v, g, **kw)
            return _Refuse.apply(o) * O_FACTOR, ht
    """,
}


@pytest.fixture
def fake_fla(tmp_path, monkeypatch):
    for rel, text in FAKE_FLA.items():
        p = tmp_path / "site" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield
    import sys
    for name in [m for m in sys.modules if m == "fla" or m.startswith("fla.")]:
        del sys.modules[name]


@interpreter
def test_fla_side_by_side_its_refusal_force_dispatch_and_its_own_gate(capsys, tmp_path, fake_fla):
    path = tmp_path / "r.json"
    code, _, _ = bench(capsys, "--variant", "gla", "--no-sdpa", "-o", str(path))
    doc = json.loads(path.read_text())
    fwd, bwd = doc["rows"]
    assert code == 0 and fwd["fla_ms"] > 0 and fwd["fla_backend"] == "standin (gla.chunk_gla)"
    assert fwd["max_rel_err_fla"] == pytest.approx(fwd["max_rel_err_ours"])
    # the backward FLA 0.6 refuses on Hopper with Triton < 3.7.1: a note, not a failure of ours
    assert bwd["fla_ms"] is None and bwd["ours_ms"] > 0
    assert any("refused by FLA" in n and "#640" in n for n in doc["details"][1]["notes"])

    code, _, _ = bench(capsys, "--variant", "gla", "--mode", "fwd+bwd", "--no-sdpa", "--fla-force", "-o", str(path))
    (row,) = json.loads(path.read_text())["rows"]
    assert code == 0 and row["fla_ms"] > 0 and row["fla_backend"].startswith("standin")

    import fla.ops.gla
    fla.ops.gla.O_FACTOR = 1.5      # FLA wrong: its time is withheld, ours still measured
    code, out, _ = bench(capsys, "--variant", "gla", "--mode", "fwd", "--no-sdpa", "-o", str(path))
    doc = json.loads(path.read_text())
    (row,), (det,) = doc["rows"], doc["details"]
    assert code == 0 and row["fla_ms"] is None and row["ours_ms"] > 0 and row["max_rel_err_fla"] > 0.3
    assert det["gate"] == {"ours": "pass", "fla": "fail"} and "fla: failed the correctness gate" in det["notes"][0]


def test_dispatch_log_reads_fla_backend_messages(fake_fla):
    from chunkproof.bench import fla as F
    log = logging.getLogger("fla.backends")
    with F.DispatchLog() as d:
        log.info("[FLA Backend] kda.chunk_kda -> tilelang")
        log.info("[FLA Backend] kda.chunk_kda_bwd -> flash_qla rejected: head dim 64")
        log.info("unrelated")
    assert d.path() == "tilelang (kda.chunk_kda); declined: flash_qla (kda.chunk_kda_bwd)"
    with F.DispatchLog() as d:
        pass
    assert d.path() == "triton"


def test_dispatch_log_reads_fla_0_5s_dispatch_module(tmp_path, monkeypatch):
    # FLA 0.5 keeps its dispatch in fla.ops.backends (0.6: fla.backends); each process
    # logs a key once, so a block forgets the keys its registries remember
    site = tmp_path / "site"
    for rel, text in {"fla/__init__.py": "", "fla/ops/__init__.py": "", "fla/ops/backends.py": """
            import logging
            logger = logging.getLogger(__name__)

            class BackendRegistry:
                _registries = {}

                def __init__(self, name):
                    self._logged = {"kda.chunk_kda -> tilelang"}
                    BackendRegistry._registries[name] = self

            BackendRegistry("kda")
            """}.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(site))
    try:
        from chunkproof.bench import fla as F
        assert F.dispatch_module() == "fla.ops.backends"
        with F.DispatchLog() as d:
            import fla.ops.backends as b
            assert b.BackendRegistry._registries["kda"]._logged == set()
            b.logger.info("[FLA Backend] kda.chunk_kda -> tilelang")
        assert d.path() == "tilelang (kda.chunk_kda)"
        with F.DispatchLog() as d:
            pass
        assert d.path() == "triton"
    finally:
        for name in [m for m in sys.modules if m == "fla" or m.startswith("fla.")]:
            del sys.modules[name]


def test_dispatch_log_of_an_fla_without_dispatch(tmp_path, monkeypatch):
    # FLA < 0.5 has no dispatch module: the block runs, and says FLA's Triton ran
    site = tmp_path / "site"
    for rel in ("fla/__init__.py", "fla/ops/__init__.py"):
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text("")
    monkeypatch.syspath_prepend(str(site))
    try:
        from chunkproof.bench import fla as F
        assert F.dispatch_module() is None
        with F.DispatchLog() as d:
            pass
        assert d.path() == "triton (FLA < 0.5: no dispatch)"
        assert F.backend("gla").startswith("triton (no BackendRegistry in fla.backends or fla.ops.backends")
    finally:
        for name in [m for m in sys.modules if m == "fla" or m.startswith("fla.")]:
            del sys.modules[name]


def test_merge_orders_rows_and_keeps_the_schema(capsys, tmp_path):
    from chunkproof.bench import report

    def part(variants):
        rows = [dict(dict.fromkeys(ROW_KEYS), variant=v, mode=m, B=1, T=64, H=2, D=16, ours_ms=1.0)
                for v in variants for m in ("fwd", "fwd+bwd")]
        dets = [{"variant": r["variant"], "mode": r["mode"], "notes": []} for r in rows]
        return report.document(rows, dets, {"device": "x"}, True)
    paths = []
    for i, vs in enumerate((["gla", "kda"], ["gated_delta_rule"])):
        paths.append(str(tmp_path / f"p{i}.json"))
        report.write_json(paths[-1], part(vs))
    out = str(tmp_path / "all.json")
    assert cli.main(["bench", "--merge", *paths, "-o", out]) == 0
    rows = json.loads(open(out).read())["rows"]
    assert [r["variant"] for r in rows[::2]] == ["gla", "gated_delta_rule", "kda"]
    assert all(list(r) == ROW_KEYS for r in rows)
    assert "| kda | fwd+bwd |" in capsys.readouterr().out


@pytest.mark.parametrize("argv, needle", [
    (["--shapes", "4x4096x16"], "is not BxTxHxD"),
    (["--shapes", "4x4096x16x0"], "is not BxTxHxD"),
    (["--variant", "no_such_variant"], "unknown variant 'no_such_variant'"),
    (["--interpret", "--variant", "derivations/examples/mamba2.py"], "declares no kernel"),
    (["--variant", "no/such/derivation.py"], "no such derivation file"),
    (["--merge", "x.json", "--variant", "derivations/examples/mamba2.py"], "with --merge, name a derivation's"),
    (["--interpret", "--shapes", "4x4096x16x128"], "too large for Triton's interpreter"),
    (["--gate-t", "0"], "--gate-t must be at least 1"),
    (["--merge", "no/such/file.json"], "--merge no/such/file.json"),
])
def test_bad_input_is_one_line_and_exit_code_2(capsys, argv, needle):
    assert cli.main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_no_gpu_without_interpret_is_one_line_and_exit_code_2(capsys, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert cli.main(["bench", "--variant", "gla"]) == 2
    err = capsys.readouterr().err
    assert "no CUDA GPU here" in err and "--interpret" in err and len(err.strip().splitlines()) == 1


def test_the_command_module_imports_nothing_heavy():
    import subprocess
    import sys
    code = ("import sys, chunkproof.cmd_bench; "
            "print(sorted(m for m in ('torch', 'triton', 'fla', 'chunkproof.bench') if m in sys.modules)); "
            "import chunkproof.bench.runner, chunkproof.bench.report; "
            "print(sorted(m for m in ('triton', 'fla', 'chunkproof.kernels') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "[]"]


def test_gpu_bench_script_parses():
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert subprocess.run(["bash", "-n", os.path.join(root, "benchmarks", "gpu_bench.sh")]).returncode == 0


@interpreter
def test_a_derivation_file_is_printed_gated_and_timed(capsys, tmp_path, fake_fla):
    # `chunkproof bench FILE.py`: its kernels printed by gen and registered (as `chunkproof
    # fuzz FILE.py` does), gated against the file's own recurrence; FLA has no op of it
    from chunkproof.codegen import variants
    from chunkproof.fuzz import cases
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "deltanet_forward_only.py")
    path = tmp_path / "u.json"
    before = list(cases.VARIANTS)
    try:
        code, _, err = bench(capsys, "--variant", data, "--mode", "fwd", "--no-sdpa", "-o", str(path))
    finally:      # registered for this test only: later tests' `all` is the bundled variants
        for n in [n for n in cases.VARIANTS if n not in before]:
            cases.VARIANTS.remove(n)
            cases.API.pop(n, None)
            variants.BY_NAME.pop(n, None)
    doc = json.loads(path.read_text())
    (row,) = doc["rows"]
    assert code == 0 and row["variant"] == "my_deltanet" and row["ours_ms"] > 0, err
    assert row["max_rel_err_ours"] < 5e-2 and row["fla_ms"] is None
    assert "fla: FLA has no op of my_deltanet" in doc["details"][0]["notes"]


def test_the_table_names_each_tensor_whose_error_is_over_flas():
    # the max-error column shows one number per side; a note names every tensor of ours
    # over FLA's on the same inputs, worst first, and none where all are at or under
    from chunkproof.bench import report
    row = dict(dict.fromkeys(ROW_KEYS), variant="retention", mode="fwd+bwd", B=1, T=64, H=2, D=16,
               max_rel_err_ours=2.7e-3, max_rel_err_fla=2.5e-3)
    over = {"variant": "retention", "mode": "fwd+bwd", "notes": [],
            "errors": {"ours": {"o": 2.768e-3, "dq": 2.5e-3, "dv": 2.664e-3, "dk": 1e-3},
                       "fla": {"o": 2.503e-3, "dq": 2.6e-3, "dv": 2.359e-3, "dk": 1e-3}}}
    text = report.table(report.document([row], [over], {"device": "x"}, True))
    assert "- retention fwd+bwd (1, 64, 2, 16): ours over FLA's error on dv 1.129x, o 1.106x" in text
    under = dict(over, errors={"ours": {"o": 1e-3}, "fla": {"o": 2e-3}})
    assert "over FLA's error" not in report.table(report.document([row], [under], {"device": "x"}, True))
    assert report.errors_over_fla({"notes": []}) == []          # a row FLA did not run
