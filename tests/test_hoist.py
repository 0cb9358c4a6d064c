"""The state scan's gated operands are computed by the intra kernel (codegen/hoist.py):
which variants, what the scan then reads, and that a regrouping is checked before a
kernel is printed from it."""
import pytest

from chunkproof.codegen import emit, hoist, plan
from chunkproof.codegen.variants import BY_NAME
from chunkproof.derivations import ir
from tests.helpers import fresh_derivation, planned

VECTOR = ["gla", "kda", "dplr_delta_rule", "rwkv6"]
SCALAR = ["gated_delta_rule", "delta_rule", "simple_gla", "retention"]


@pytest.mark.parametrize("name", VECTOR)
def test_vector_gated_scans_read_their_operands(name):
    """A vector-gated scan reads its gated operands (fp32, written by the intra kernel)
    and neither K nor the whole C x Dk log gate: only the gate's last row."""
    p, _ = planned(name)
    assert p.hoisted and p.hoisted <= set(p.boundary) and p.hoisted <= set(p.intra)
    assert all(emit.stored_fp32(p, n) for n in p.hoisted)
    intra, state, _ = emit.forward_stages(p)
    assert p.hoisted <= set(intra.writes)
    for n in p.hoisted:     # written whole: the intra kernel applies the gate before the store
        assert any(ln.target == f"b_{n}" for ln in intra.lines)
    code = "\n".join(ln.code for ln in state.lines)
    assert all(f"b_{n}" in code for n in p.hoisted)
    assert "k" not in {ld.arg for ld in state.loads}
    assert not any(ld.log for ld in state.loads)
    gates = (p.logs | p.sums) & set(state.reads)
    assert gates
    for g in gates:     # the gate's last row, never its whole tile
        assert {f"b_{g}_log", f"b_{g}"}.isdisjoint(state.live)
        assert {f"b_{g}_log_last", f"b_{g}_last"} & state.live


@pytest.mark.parametrize("name", SCALAR)
def test_scalar_gated_scans_are_left_alone(name):
    """A per-row (C x 1) gate costs the scan one column: nothing is moved, and the claim
    is printed in its own grouping."""
    p, _ = planned(name)
    assert not p.hoisted
    assert not p.claims["S"].id.endswith(".regrouped")


def test_regrouping_takes_the_diagonal_inside():
    p, _ = planned("kda")
    c = plan._claim(p.deriv, BY_NAME["kda"].state_claim)
    body = hoist.regroup(c.rhs)
    assert body != c.rhs
    kr = [e for e in ir.walk(body) if isinstance(e, ir.MatMul) and isinstance(e.a, ir.Var) and e.a.name == "Kr"]
    assert kr and isinstance(kr[0].b, ir.DiagM)
    assert p.claims["S"].id == f"{c.id}.regrouped" and p.claims["S"].rhs == body


def test_a_wrong_regrouping_is_refused(monkeypatch):
    """The regrouped right-hand side is a claim of its own and goes through the same
    gate: a regrouping that drops the trailing Diag(gamma^C) of the update is refused."""
    real = hoist.regroup

    def dropping(e):
        e = real(e)
        if isinstance(e, ir.Add) and isinstance(e.b, ir.MatMul) and isinstance(e.b.b, ir.MatMul):
            return ir.Add(e.a, ir.MatMul(e.b.a, e.b.b.a))
        return e
    monkeypatch.setattr(hoist, "regroup", dropping)
    v = BY_NAME["kda"]
    with pytest.raises(plan.Refused, match=r"kda\.S\.regrouped"):
        plan.build(v, fresh_derivation(v))
