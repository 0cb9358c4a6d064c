"""Kernel declarations (derivations/kernel.py) and the backward claims gen picks where
a declaration names none (codegen/backward_pick.py)."""
import dataclasses
import importlib
import os
import subprocess
import sys

import pytest
import torch

from chunkproof.codegen import backward_pick, gen
from chunkproof.codegen.printer import CodegenError
from chunkproof.codegen.variants import BY_NAME, from_kernel
from chunkproof.derivations import kernel as K
from chunkproof.derivations.dsl import DeclarationError
from chunkproof.derivations.ir import Var
from chunkproof.derivations.loader import bundled, from_file
from chunkproof.fuzz.precision_measure import Measure

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORWARD_ONLY = os.path.join(ROOT, "tests", "data", "deltanet_forward_only.py")


def test_delta_rule_picks_its_own_claims():
    # its declaration names delta beta's claim alone (of two that hold, the grouped one);
    # the picker fills every other slot from the derivation's adjoint claims
    (d,) = bundled(["variants.delta_rule"])
    v, derived = backward_pick.resolve(BY_NAME["delta_rule"], d)
    assert not derived
    assert v.backward["dS"] == "delta_rule.dS" and v.backward["dS_prev"] == "delta_rule.dS_prev"
    assert v.backward["grads"] == {"q": "delta_rule.dQ", "k": "delta_rule.dK", "v": "delta_rule.dV",
                                   "beta": "delta_rule.dbeta_grouped"}
    assert set(v.backward["inner"]) == {"delta_rule." + n for n in ("dVnew", "dU", "dW", "dAt", "dXt")}


def test_a_named_claim_is_kept_and_an_unknown_one_is_named():
    v = BY_NAME["simple_gla"]
    (d,) = bundled(["variants.simple_gla"])
    got, _ = backward_pick.resolve(v, d)
    assert got.backward["grads"]["g"] == "simple_gla.dg_scores"
    bad = dataclasses.replace(v, backward={"grads": {"g": "simple_gla.nope"}})
    with pytest.raises(CodegenError, match="names claim 'simple_gla.nope'"):
        backward_pick.resolve(bad, d)


def test_a_file_without_backward_claims_gets_them_derived():
    (d,) = from_file(FORWARD_ONLY)
    v = from_kernel(d.kernels[0], FORWARD_ONLY)
    got, derived = backward_pick.resolve(v, d)
    assert derived and all(c.id.startswith("wy.") for c in derived)
    assert set(got.backward["grads"]) == {"q", "k", "v", "beta"}


def test_derived_kernel_equals_the_bundled_delta_rule(tmp_path):
    # the kernel printed from derived claims and the one printed from delta_rule.py's
    # own claims: outputs, final state and every gradient agree to fp32 rounding
    out = tmp_path / "mydn_kernels"
    files = gen.render_all(gen.user_variants(FORWARD_ONLY), out_dir=str(out), measure=Measure)
    gen.write(files, str(out), prune=False)
    sys.path.insert(0, str(tmp_path))
    try:
        mine = importlib.import_module("mydn_kernels").chunk_my_deltanet
    finally:
        sys.path.remove(str(tmp_path))
    theirs = importlib.import_module("chunkproof.kernels").chunk_delta_rule
    g = torch.Generator().manual_seed(0)
    q, v = torch.randn(1, 37, 2, 16, generator=g), torch.randn(1, 37, 2, 8, generator=g)
    k = torch.nn.functional.normalize(torch.randn(1, 37, 2, 16, generator=g), dim=-1)
    beta = torch.rand(1, 37, 2, generator=g)
    runs = []
    for fn in (mine, theirs):
        xs = [x.clone().requires_grad_() for x in (q, k, v, beta)]
        o, ht = fn(*xs, output_final_state=True)
        (o.sum() + (ht * ht).sum()).backward()
        runs.append([o, ht] + [x.grad for x in xs])
    for a, b in zip(*runs):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), (a - b).abs().max()


def test_declaration_errors_name_the_problem():
    (d,) = from_file(FORWARD_ONLY)
    P = d.programs["wy"]
    with pytest.raises(DeclarationError, match="chunk_<name>"):
        K.kernel(d, "my_deltanet", P, "my.O", "my.S", dict(q="Q"))
    with pytest.raises(DeclarationError, match="defined by program wy"):
        K.kernel(d, "chunk_x", P, "my.O", "my.S", dict(q=Var("At", "C", "C")))
    with pytest.raises(DeclarationError, match="not an input of program wy"):
        K.kernel(d, "chunk_x", P, "my.O", "my.S", dict(q="Z"))
    with pytest.raises(DeclarationError, match="unknown key"):
        K.kernel(d, "chunk_x", P, "my.O", "my.S", dict(q="Q"), backward=dict(dK="x"))
    with pytest.raises(DeclarationError, match="log gate binds to"):
        K.kernel(d, "chunk_x", P, "my.O", "my.S", dict(v=K.log_of("V")))


def test_gen_cli_on_a_file(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = tmp_path / "k"
    r = subprocess.run([sys.executable, "-m", "chunkproof", "gen", FORWARD_ONLY, "--out", str(out)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out)) == ["__init__.py", "_runtime.py", "my_deltanet.precision.json", "my_deltanet.py"]
    r = subprocess.run([sys.executable, "-m", "chunkproof", "gen", FORWARD_ONLY, "--out", str(out), "--check"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    nokernel = tmp_path / "none.py"
    nokernel.write_text(open(FORWARD_ONLY).read().replace("kernel(D, ", "(lambda *a, **k: None)(D, "))
    r = subprocess.run([sys.executable, "-m", "chunkproof", "gen", str(nokernel)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "declares no kernel" in r.stderr and "Traceback" not in r.stderr
