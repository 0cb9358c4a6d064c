"""A parameter's whole gradient (summed over every step) is an adjoint claim decided
by a dual number that moves the parameter at every step at once."""
import json

import numpy as np

from chunkproof.cli import main
from chunkproof.derivations.loader import from_file
from chunkproof.verify.adjoints import param_gradients
from chunkproof.verify.evaluate import Point
from chunkproof.verify.fields import ModP
from chunkproof.verify.levels import EXACT_SIZES, jvp_param

RETNET = "derivations/examples/retnet.py"


def _report(path, tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["verify", "-q", "--no-float", "--claim", "retnet.d", "--format", "json", "-o", str(out), path])
    capsys.readouterr()
    return rc, {c["id"]: c for c in json.loads(out.read_text())["claims"]}


def test_summed_gradients_are_adjoints_and_hold(tmp_path, capsys):
    rc, claims = _report(RETNET, tmp_path, capsys)
    assert rc == 0
    for cid in ("retnet.dtau", "retnet.dgamma"):
        assert claims[cid]["kind"] == "adjoint" and claims[cid]["verdict"] == "holds", claims[cid]


def test_a_wrong_summed_gradient_fails(tmp_path, capsys):
    src = open(RETNET).read()
    right = "sum_blocks(Inner(DO, Ou))"
    assert src.count(right) == 1
    bad = tmp_path / "retnet_bad.py"
    bad.write_text(src.replace(right, f"{right} + {right}"))
    rc, claims = _report(str(bad), tmp_path, capsys)
    assert rc == 1
    assert claims["retnet.dtau"]["verdict"] == "fails"
    assert claims["retnet.dgamma"]["verdict"] == "holds"


def test_jvp_through_every_step_is_the_summed_reverse_mode_gradient():
    (deriv,) = from_file(RETNET)
    rng = np.random.default_rng(4)
    f = ModP(rng)
    pt = Point.sample(deriv, deriv.default_recurrence, f, EXACT_SIZES, rng)
    grads = param_gradients(pt)
    for name in pt.param_decl:
        D = f.rand(*f.shape(pt.param_value(name)))
        assert jvp_param(pt, name, D) == int((grads[name] * D % f.p).sum() % f.p), name
