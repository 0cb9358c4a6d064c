"""`chunkproof report` / `verify`: formats, exit codes, bad input."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args):
    p = subprocess.run([sys.executable, "-m", "chunkproof", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def test_verify_example_all_hold_exit_0():
    code, out, err = run("verify", "derivations/examples/mamba2.py", "--format", "json", "-q")
    assert code == 0, err
    data = json.loads(out)
    assert data["summary"]["claims"] == len(data["claims"]) > 5
    for rec in data["claims"]:
        for key in ("id", "note", "citation", "latex", "kind", "verdict", "corrected_of"):
            assert key in rec
        assert rec["verdict"] == "holds"


def test_a_typo_is_reported_with_sizes_entries_seed_and_residual():
    code, out, err = run("verify", "tests/data/wrong_dK.py", "--format", "json", "-q",
                         "--claim", "typo")
    assert code == 1
    (rec,) = json.loads(out)["claims"]
    assert rec["verdict"] == "fails"
    assert rec["smallest_failing_sizes"].startswith("C=1")
    assert rec["mismatch"]["entries"] and isinstance(rec["mismatch"]["seed"], int)
    assert "alpha" in rec["residual"]


def test_shape_error_is_a_verdict_with_a_one_line_message():
    code, out, err = run("verify", "tests/data/shape_error.py", "--claim", "bad.QS", "-q")
    assert code == 1
    assert "ILL" in out and "bad.QS" in err and "shape_error.py" in err and "Traceback" not in err
    assert "line 3" in err


def test_bad_inputs_exit_2_with_one_line_and_no_traceback():
    for args, needle in [
        (("verify", "tests/data/does_not_exist.py"), "no such file"),
        (("verify", "tests/data/import_error.py"), "import_error.py:2"),
        (("verify", "tests/data/unknown_symbol.py", "--claim", "bad.Z"), "Zeta"),
        (("report", "no_such_note"), "not a derivation file"),
    ]:
        code, out, err = run(*args, "-q")
        assert code == 2, (args, code, err)
        assert needle in err, (args, err)
        assert "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err


def test_markdown_and_table_formats_and_output_file(tmp_path):
    target = tmp_path / "r.md"
    code, out, err = run("verify", "derivations/examples/mamba2.py", "--format", "markdown",
                         "-o", str(target), "-q")
    assert code == 0 and out == ""
    text = target.read_text()
    assert text.startswith("# chunkproof report") and "| `mamba2.O` |" in text
    code, out, err = run("verify", "derivations/examples/mamba2.py", "-q", "--no-float")
    assert code == 0 and "9 claims: 9 hold" in out or "claims:" in out
