"""Claims that hold keep holding across sizes and seeds (no false alarm);
corrections hold and the literal lines they correct do not."""
from hypothesis import HealthCheck, given, settings, strategies as st

from verify.check import exact_once
from verify.evaluate import Sizes
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


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(C=st.integers(2, 6), Dk=st.integers(1, 4), Dv=st.integers(1, 4), N=st.integers(2, 3),
       seed=st.integers(1, 10**6), pick=st.randoms(use_true_random=False))
def test_holding_claims_hold_at_random_sizes(C, Dk, Dv, N, seed, pick):
    v = verdicts()
    holding = [(d, c) for d, c in all_claims() if v[c.id] == "holds"]
    T = 2 if C % 2 == 0 else 1
    sizes = Sizes(C=C, Dk=Dk, Dv=Dv, N=N, T=T)
    for d, c in pick.sample(holding, min(12, len(holding))):
        if T == 1 and any(type(n).__name__ == "SubBlock" for n in _nodes(c)):
            continue
        m = exact_once(d, c, sizes, seed)
        assert m is None, f"false alarm: {c.id} ({c.citation}) at {sizes}, seed {seed}: {m}"


def _nodes(c):
    from derivations.ir import walk
    return list(walk(c.lhs)) + list(walk(c.rhs))
