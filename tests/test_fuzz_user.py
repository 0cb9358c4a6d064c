"""`chunkproof fuzz FILE.py`: a user's derivation's kernels, printed by gen and fuzzed
against the file's own recurrence (chunkproof.fuzz.user)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORWARD_ONLY = os.path.join(ROOT, "tests", "data", "deltanet_forward_only.py")


def _fuzz(*args):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "chunkproof", "fuzz", *args, "--no-save", "--no-db", "-q"],
                          capture_output=True, text=True, env=env, cwd=ROOT)


def test_fuzz_a_derivation_file():
    r = _fuzz(FORWARD_ONLY, "--examples", "2", "--property", "matches_fp64", "--property", "split_sequence")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| ") and "my_deltanet" in ln]
    assert len(rows) == 2 and all("| 2 | 0 |" in ln for ln in rows), r.stdout
    assert not [p for p in os.listdir(os.path.dirname(FORWARD_ONLY)) if p.endswith("_kernels")]


def test_fuzz_a_file_whose_claim_fails_is_refused(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(open(FORWARD_ONLY).read().replace("S_PREV + Vnew.T @ K, \"wy\")", "S_PREV + Vnew.T @ Q, \"wy\")"))
    r = _fuzz(str(bad), "--examples", "1")
    assert r.returncode == 1 and "refused: claim my.S" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_log_gate_whose_gradient_is_derived(tmp_path):
    # derivations/examples/mamba2.py with a kernel declared: its file gives delta Alpha, not
    # the log gate's delta Alpha . Alpha, so gen derives that one (an identity claim: its
    # left side is not an adjoint), and the kernel passes at typical and extreme gates
    f = tmp_path / "my_mamba2.py"
    f.write_text(open(os.path.join(ROOT, "derivations", "examples", "mamba2.py")).read() + (
        "\nfrom chunkproof.derivations.kernel import kernel, log_of\n"
        "kernel(D, 'chunk_my_mamba2', 'mamba2_chunk', outputs='mamba2.O', state='mamba2.S',\n"
        "       args=dict(q='Q', k='K', v='V', g=log_of('Alpha')))\n"))
    r = _fuzz(str(f), "--examples", "2", "--property", "matches_fp64", "--property", "extreme_gates")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| ") and "my_mamba2" in ln]
    assert len(rows) == 2 and all("| 2 | 0 |" in ln for ln in rows), r.stdout
