"""The intra stage printed as two kernels where its C x D tiles apply the chunk's
triangular inverse (codegen/plan.py _split_wide; docs/kernels.md "two intra kernels")."""
import pytest

from chunkproof.codegen import emit, gen, plan
from chunkproof.codegen.variants import BY_NAME
from chunkproof.derivations import ir


def _plan(name):
    v = BY_NAME[name]
    return gen._picked(v, plan.load_variant(v), True)[1]


SPLIT = ["gated_delta_rule", "kda", "delta_rule", "dplr_delta_rule"]


@pytest.mark.parametrize("name, wide", [
    ("gated_delta_rule", ["Wl", "U"]), ("kda", ["hs0", "W", "U"]), ("delta_rule", ["W", "U"]),
    ("dplr_delta_rule", ["hs0", "hs1", "W", "C"]),
    ("gla", []), ("rwkv6", []), ("retention", []), ("simple_gla", [])])
def test_the_variants_whose_wy_tiles_get_a_kernel_of_their_own(name, wide):
    assert _plan(name).wide == wide


def test_dplr_c_reads_its_chunk_product_from_the_first_kernel():
    # C = -E (B K^T . M) V: the C x C part is named, formed by the first kernel, and
    # freed after the wide kernel (no later kernel reads it)
    p = _plan("dplr_delta_rule")
    dmap = dict(p.defs)
    named = [n for n in p.boundary if n.startswith("ch") and n in ir_names(dmap["C"])]
    assert len(named) == 1 and any(plan._chunk_gram(x) for x in ir.walk(dmap[named[0]]))
    assert not any(plan._chunk_gram(x) for x in ir.walk(dmap["C"]))
    src = gen.render_variant(BY_NAME["dplr_delta_rule"])
    assert src.count(f"del {named[0]}     # read by the wide kernel alone") == 3
    assert f"{named[0]}={named[0]}" not in src


def ir_names(e):
    return {x.name for x in ir.walk(e) if isinstance(x, ir.Var)}


@pytest.mark.parametrize("name", SPLIT)
def test_the_wide_kernel_reads_what_the_first_wrote_and_inverts_nothing(name):
    p = _plan(name)
    intra, _, _ = emit.forward_stages(p)
    wide = emit.intra_wide_stage(p)
    assert wide.reads and set(wide.reads) <= set(intra.writes)
    assert not set(wide.writes) & set(intra.writes)
    assert set(intra.writes) | set(wide.writes) == set(p.boundary)
    assert not any("_inv_unit_lower" in ln.code for ln in wide.lines)
    assert any("_inv_unit_lower" in ln.code for ln in intra.lines)


@pytest.mark.parametrize("name", SPLIT)
def test_the_module_launches_both_wherever_it_runs_the_intra_stage(name):
    import importlib
    src = open(importlib.import_module(f"chunkproof.kernels.{name}").__file__).read()
    first = src.count('spec["_intra_kernel"].on(_intra_kernel)')
    assert first >= 2 and src.count('spec["_intra_wide_kernel"].on(_intra_wide_kernel)') == first
