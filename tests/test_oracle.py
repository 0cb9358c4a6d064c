"""The generic fp64 oracle (chunkproof.fuzz.oracle: a derivation's own recurrence, run
in torch) against the recurrences written out by hand for the four variants first
generated: outputs, final states and autograd gradients."""
import pytest
import torch

from chunkproof.codegen.variants import BY_NAME
from chunkproof.fuzz import oracle
from chunkproof.fuzz.cases import make_inputs
from chunkproof.fuzz.reference import HAND_WRITTEN, _hand_recurrence, reference_grads


@pytest.mark.parametrize("name", HAND_WRITTEN)
def test_oracle_equals_the_hand_written_recurrence(name):
    args, ref, h0 = make_inputs(name, 2, 9, 3, 5, 7, seed=1, h0=True, dtype=torch.float64)
    v = BY_NAME[name]
    inputs = dict(zip([a.name for a in v.args], args))
    o, ht = oracle.run(v, inputs, initial_state=h0, scale=0.3)
    ro, rh = _hand_recurrence(name, initial_state=h0, scale=0.3, **ref)
    assert torch.allclose(o, ro, rtol=1e-12, atol=1e-12) and torch.allclose(ht, rh, rtol=1e-12, atol=1e-12)
    leaves = {n: x.clone().requires_grad_() for n, x in inputs.items()}
    do, dht = torch.randn_like(o), torch.randn_like(ht)
    o, ht = oracle.run(v, leaves, initial_state=h0, scale=0.3)
    ((o * do).sum() + (ht * dht).sum()).backward()
    want = reference_grads(name, ref, do, dht, scale=0.3, initial_state=h0)
    for a in v.args:
        w = want["g" if a.name == "gk" else a.name]
        assert torch.allclose(leaves[a.name].grad, w, rtol=1e-10, atol=1e-10), a.name


def test_oracle_names_what_it_cannot_run():
    from chunkproof.derivations import ir
    from chunkproof.derivations.dsl import Program
    st = oracle._Step(Program("p", "step", []), {"x": torch.zeros(1)}, 2, 2, {})
    with pytest.raises(oracle.OracleError, match="cannot run Inv"):
        st.ev(ir.Inv(ir.Eye("Dk")))
