"""Claims that hold keep holding across sizes and seeds (no false alarm);
corrections hold and the literal lines they correct do not."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from chunkproof.derivations import ir

from chunkproof.verify.levels import exact_once
from chunkproof.verify.evaluate import Sizes
from tests.helpers import all_claims, derivations, verdicts


def test_every_correction_holds_and_its_literal_line_does_not():
    v = verdicts()
    bad = []
    for d, c in all_claims():
        if c.corrected_of:
            if v[c.id] != "holds":
                bad.append(f"{c.id}: correction does not hold ({v[c.id]})")
            if v[c.corrected_of] == "holds":
                bad.append(f"{c.corrected_of}: holds, so the correction {c.id} is not needed")
            if not c.why:
                bad.append(f"{c.id}: correction without a reason")
    assert not bad, "\n".join(bad)


def test_every_note_has_claims_of_every_kind_it_needs():
    for d in derivations():
        assert d.claims, d.name
        kinds = {c.kind for c in d.claims}
        assert "forward" in kinds, d.name


CLAIMS = all_claims()  # which of them hold is decided inside the test


@pytest.mark.parametrize("deriv,claim", CLAIMS, ids=[c.id for _, c in CLAIMS])
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(C=st.integers(2, 5), Dk=st.integers(1, 4), Dv=st.integers(1, 4), N=st.integers(2, 3),
       seed=st.integers(1, 10**6))
def test_holding_claims_hold_at_random_sizes(deriv, claim, C, Dk, Dv, N, seed):
    """No false alarm: a claim that holds at the default sizes holds at random
    other sizes (Dk != Dv included), chunk counts and seeds."""
    if verdicts()[claim.id] != "holds":
        return
    sub = any(isinstance(n, ir.SubBlock) for n in list(ir.walk(claim.lhs)) + list(ir.walk(claim.rhs)))
    if sub:
        C = 4  # two sub-chunks of size 2
    sizes = Sizes(C=C, Dk=Dk, Dv=Dv, N=N, T=2 if sub else 1)
    m = exact_once(deriv, claim, sizes, seed)
    assert m is None, f"false alarm: {claim.id} ({claim.citation}) at {sizes}, seed {seed}: {m}"
