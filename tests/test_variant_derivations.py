"""The derivations of issue 17's four new variants (derivations/variants/): each loads,
every claim holds at the default size sets and at another, and a one-term slip in a
backward claim is caught.  In-process: an interpreter per run would cost 3 s."""
import contextlib
import io
import json
import os

import pytest

from chunkproof.derivations.loader import from_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("delta_rule", "simple_gla", "retention", "rwkv6")
# odd chunk sizes, K != V, sub-chunks of 1 and 2, four chunks
OTHER_SIZES = "C=7,Dk=3,Dv=4,chunks=3,T=1;C=4,Dk=2,Dv=5,chunks=4,T=2"


def _path(name):
    return os.path.join(ROOT, "derivations", "variants", f"{name}.py")


def _verify(path, *args):
    from chunkproof.cli import main
    from chunkproof.verify import levels
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["verify", "-q", "-j", "1", "--format", "json", str(path), *args])
    finally:
        levels.use_sizes(None)     # --sizes sets the exact level's sizes process-wide
    return code, json.loads(out.getvalue()) if out.getvalue() else None, err.getvalue()


@pytest.mark.parametrize("name", VARIANTS)
def test_loads_with_a_chunk_program_and_backward_claims(name):
    (d,) = from_file(_path(name))
    assert d.name == name
    chunk = [p for p in d.programs.values() if p.block == "chunk"]
    assert len(chunk) == 1 and {"O", "S"} <= set(chunk[0].names())
    kinds = {c.kind for c in d.claims}
    assert {"forward", "adjoint"} <= kinds
    # every input of the recurrence and every parameter has its gradient claimed
    targets = {c.lhs.var.name for c in d.claims if c.kind == "adjoint" and not (c.lhs.via or c.lhs.excl)}
    rec = d.recurrences[d.default_recurrence]
    assert {i.seq for i in rec.inputs} | set(rec.parameters()) | {"S_prev"} <= targets


@pytest.mark.parametrize("sizes", [(), ("--sizes", OTHER_SIZES)], ids=["default", "other"])
@pytest.mark.parametrize("name", VARIANTS)
def test_every_claim_holds(name, sizes):
    code, data, err = _verify(_path(name), *sizes)
    assert code == 0, err
    verdicts = {c["id"]: c["verdict"] for c in data["claims"]}
    assert data["summary"]["claims"] == len(verdicts) > 10
    assert set(verdicts.values()) == {"holds"}, {k: v for k, v in verdicts.items() if v != "holds"}
    assert f"{name}_chunk.reproduces" in verdicts


# (claim, a term as the file writes it, what it becomes): one term dropped or changed
SLIPS = {
    "delta_rule": ("delta_rule.dK", " + DXB @ K + DXB.T @ K, PR)", " + DXB @ K, PR)"),
    "simple_gla": ("simple_gla.dGc", " + PlaceLast(adj(gC)), PR)", ", PR)"),
    "retention": ("retention.dV", "gC * (Kr @ dS.T) + tau", "tau"),
    "rwkv6": ("rwkv6.dQ", " + diag(adj(Bu)) @ K @ diag(u), PR)", ", PR)"),
}


@pytest.mark.parametrize("name", VARIANTS)
def test_a_one_term_slip_in_a_backward_claim_is_caught(name, tmp_path):
    claim, old, new = SLIPS[name]
    src = open(_path(name), encoding="utf-8").read()
    assert src.count(old) == 1, old
    slipped = tmp_path / f"{name}_slip.py"
    slipped.write_text(src.replace(old, new), encoding="utf-8")
    code, data, err = _verify(slipped, "--no-float", "--no-diagnose", "--no-suggest")
    assert code == 1, err
    verdicts = {c["id"]: c["verdict"] for c in data["claims"]}
    assert verdicts.pop(claim) == "fails"
    assert set(verdicts.values()) == {"holds"}
