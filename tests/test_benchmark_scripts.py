"""The GPU benchmark scripts' CPU paths (interpreter, tiny shapes): they must run, so that
device time is not spent finding a broken script."""
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def bench_path(monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))


def test_fwdbwd_smoke_measures_accuracy_and_writes_json(bench_path, tmp_path, capsys):
    import fwdbwd_vs_fla as fb
    rc = fb.main(["--variant", "kda", "--smoke", "--dtype", "fp32", "--shape", "1,20,1,16",
                  "--ours-set", "grad_warps=4", "--tag", "w4", "--json-dir", str(tmp_path)])
    assert rc == 0
    res = json.loads((tmp_path / "kda@w4.json").read_text())
    assert res["ours_set"] == ["grad_warps=4"] and "failed" not in res["ours"], res
    assert all(e <= 1e-4 for e in res["ours"]["err"].values()), res["ours"]["err"]
    assert res["ours"]["fwdbwd_ms"] > 0          # the timed path ran with gradients
    out = tmp_path / "table.md"
    assert fb.main(["--table", str(tmp_path), "--out", str(out)]) == 0
    assert "| kda [w4] |" in out.read_text()


def test_fwdbwd_rejects_an_unknown_tiling_key(bench_path):
    import fwdbwd_vs_fla as fb
    with pytest.raises(SystemExit, match="not a TILING key"):
        fb.main(["--variant", "gla", "--smoke", "--shape", "1,5,1,16", "--ours-set", "nope=1"])


def test_cpu_grad_accuracy_rows_and_unknown_key(bench_path, capsys):
    import cpu_grad_accuracy as ga
    ga.main(["--variant", "gla", "--shape", "1,20,1,16,16", "--set", "", "--set", "grad_dots=input"])
    rows = capsys.readouterr().out.strip().splitlines()
    assert [r.split(":")[0] for r in rows] == ["gla defaults", "gla grad_dots=input"]
    assert all("dg " in r for r in rows)
    with pytest.raises(SystemExit, match="not TILING keys"):
        ga.main(["--variant", "gla", "--shape", "1,5,1,16,16", "--set", "nope=1"])
