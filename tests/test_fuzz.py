"""`chunkproof fuzz`: the campaign runs, its properties catch broken kernels, and the
failing seeds it saves are replayed here."""
import json
import os

import pytest
import torch

from chunkproof import cli
from chunkproof.fuzz import cases
from chunkproof.fuzz.campaign import check, run_campaign, save_failures

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAVED = os.path.join(ROOT, "tests", "fuzz_failures.json")


def _saved():
    if not os.path.exists(SAVED):
        return []
    with open(SAVED) as f:
        return [r for r in json.load(f) if r["device"] == "cpu" or torch.cuda.is_available()]


@pytest.mark.parametrize("rec", _saved(), ids=lambda r: f"{r['variant']}-{r['property']}-{r['seed']}-{r['dtype']}")
def test_saved_failing_seeds_now_pass(rec):
    ok, err, tol, out = check(rec["variant"], rec["property"], rec["seed"], rec["device"], rec["dtype"])
    assert ok, f"{out['example']}: {out['detail']} (error {err:.2e} > {tol:.1e})"


def test_campaign_cli_prints_the_table(capsys):
    rc = cli.main(["fuzz", "--variant", "kda", "--examples", "1", "--no-save", "-q",
                   "--property", "matches_fp64", "--property", "split_sequence"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "| matches_fp64 | kda | 1 | 0 |" in out and "| split_sequence | kda | 1 | 0 |" in out


def _broken(monkeypatch, name, how):
    """Replace the public function of chunkproof.kernels.<name> by a broken one."""
    mod = cases.module(name)
    real = getattr(mod, cases.API[name])

    def fn(*args, initial_state=None, output_final_state=False, **kw):
        if how == "ignores_state":
            initial_state = None
        o, ht = real(*args, initial_state=initial_state, output_final_state=output_final_state, **kw)
        if how == "peeks_ahead":        # output t sees token t+1
            o = o + 1e-2 * torch.roll(o, -1, dims=1)
        elif how == "off_by_a_little":
            o = o * 1.001
        elif how == "skips_last_row":   # the last position is never written
            o = o.clone()
            o[:, -1:] = mod.torch.empty_like(o[:, -1:])
        return o, ht
    monkeypatch.setattr(mod, cases.API[name], fn)


@pytest.mark.parametrize("how, prop", [("peeks_ahead", "causality"), ("ignores_state", "split_sequence"),
                                       ("off_by_a_little", "matches_fp64"), ("skips_last_row", "poisoned_outputs")])
def test_properties_catch_broken_kernels(monkeypatch, how, prop):
    name = "gated_delta_rule"
    ok_before, *_ = check(name, prop, 3, "cpu", "fp32")
    assert ok_before
    _broken(monkeypatch, name, how)
    ok, err, tol, rec = check(name, prop, 3, "cpu", "fp32")
    assert not ok and rec["detail"], rec


def test_a_crash_is_a_recorded_failure(monkeypatch):
    mod = cases.module("gla")

    def boom(*a, **k):
        raise RuntimeError("kernel exploded")
    monkeypatch.setattr(mod, "chunk_gla", boom)
    cells = run_campaign(["gla"], ["matches_fp64"], "cpu", "fp32", 2, 0, quiet=True)
    c = cells[("matches_fp64", "gla")]
    assert c.failures == 2 and "kernel exploded" in c.failed[0]["detail"]


def test_failures_are_merged_not_duplicated(tmp_path, monkeypatch):
    mod = cases.module("gla")
    monkeypatch.setattr(mod, "chunk_gla", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x")))
    cells = run_campaign(["gla"], ["causality"], "cpu", "fp32", 2, 5, quiet=True)
    path = str(tmp_path / "f.json")
    assert save_failures(path, cells) == 2
    assert save_failures(path, cells) == 0
    with open(path) as f:
        recs = json.load(f)
    assert [r["seed"] for r in recs] == [5, 6] and all(r["error"] == "inf" for r in recs)


def test_bad_arguments_are_input_errors(capsys):
    assert cli.main(["fuzz", "--variant", "nope", "--examples", "1"]) == cli.EXIT_INPUT
    assert "unknown variant 'nope'" in capsys.readouterr().err
    assert cli.main(["fuzz", "--variant", "gla", "--examples", "0"]) == cli.EXIT_INPUT
    assert cli.main(["fuzz", "--variant", "gla", "--property", "nope", "--examples", "1"]) == cli.EXIT_INPUT
    if not torch.cuda.is_available():
        assert cli.main(["fuzz", "--device", "cuda", "--examples", "1"]) == cli.EXIT_INPUT
        assert "no CUDA device" in capsys.readouterr().err


@pytest.mark.parametrize("name", cases.VARIANTS)
def test_gradient_oracle_matches_finite_differences(name):
    # the fp64 autograd oracle the backward kernels will be fuzzed against
    from chunkproof.fuzz.reference import recurrence, reference_grads
    _, ref, state = cases.make_inputs(name, 1, 5, 1, 3, 2, seed=1, dtype=torch.float64, h0=True)
    gen = torch.Generator().manual_seed(0)
    do = torch.randn(1, 5, 1, 2, generator=gen, dtype=torch.float64)
    dht = torch.randn(1, 1, 3, 2, generator=gen, dtype=torch.float64)
    state = state.to(torch.float64)
    grads = reference_grads(name, ref, do, dht, initial_state=state)

    def loss(**kw):
        o, ht = recurrence(name, **kw)
        return float((o * do).sum() + (ht * dht).sum())
    eps = 1e-6
    for n, gr in grads.items():
        x = state if n == "initial_state" else ref[n]
        idx = tuple(int(torch.randint(0, s, (1,), generator=gen)) for s in x.shape)
        plus, minus = x.clone(), x.clone()
        plus[idx] += eps
        minus[idx] -= eps
        kw_p = dict(ref, initial_state=state) if n != "initial_state" else dict(ref, initial_state=plus)
        kw_m = dict(ref, initial_state=state) if n != "initial_state" else dict(ref, initial_state=minus)
        if n != "initial_state":
            kw_p[n], kw_m[n] = plus, minus
        fd = (loss(**kw_p) - loss(**kw_m)) / (2 * eps)
        assert abs(fd - float(gr[idx])) <= 1e-6 * max(1.0, abs(fd)), f"{name} d{n}{idx}: fd {fd} vs {float(gr[idx])}"


def test_interrupt_keeps_and_saves_what_ran(tmp_path, monkeypatch, capsys):
    from chunkproof.fuzz import campaign
    calls = []
    real = campaign.check

    def check_then_interrupt(*a):
        calls.append(a)
        if len(calls) == 3:
            raise KeyboardInterrupt
        ok, err, tol, rec = real(*a)
        return False, float("inf"), tol, rec      # count every example as failing
    monkeypatch.setattr(campaign, "check", check_then_interrupt)
    path = tmp_path / "f.json"
    rc = cli.main(["fuzz", "--variant", "gla", "--property", "matches_fp64", "--examples", "5", "-q",
                   "--save", str(path)])
    out = capsys.readouterr().out
    assert rc == 130 and "interrupted" in out and "| matches_fp64 | gla | 2 | 2 |" in out
    assert len(json.loads(path.read_text())) == 2


def _broken_backward(monkeypatch, name, how):
    """Replace chunkproof.kernels.<name>._backward by one with a broken gradient."""
    mod = cases.module(name)
    real = mod._backward

    def bwd(*args, **kw):
        g = real(*args, **kw)
        if how == "dk_off_by_a_little":
            g["k"] = g["k"] * 1.001
        elif how == "dq_sees_later_tokens":
            g["q"] = g["q"] + 1e-2 * torch.roll(g["q"], -1, dims=1)
        elif how == "dv_skips_last_row":
            g["v"] = g["v"].clone()
            g["v"][:, -1:] = mod.torch.empty_like(g["v"][:, -1:])
        elif how == "drops_initial_state_grad":
            g["initial_state"] = torch.zeros_like(g["initial_state"])
        return g
    monkeypatch.setattr(mod, "_backward", bwd)


@pytest.mark.parametrize("how, prop", [("dk_off_by_a_little", "matches_fp64"),
                                       ("dq_sees_later_tokens", "causality"),
                                       ("dv_skips_last_row", "poisoned_outputs"),
                                       ("drops_initial_state_grad", "split_sequence")])
def test_properties_catch_broken_gradients(monkeypatch, how, prop):
    name = "kda"
    seed = next(s for s in range(50) if cases_h0(name, prop, s))
    ok_before, *_ = check(name, prop, seed, "cpu", "fp32")
    assert ok_before
    _broken_backward(monkeypatch, name, how)
    ok, err, tol, rec = check(name, prop, seed, "cpu", "fp32")
    assert not ok and rec["detail"], rec


def cases_h0(name, prop, seed):
    # an example that has T > 1 (and, for split_sequence, passes a state across the cut)
    from chunkproof.fuzz.properties import draw
    ex = draw(name, prop, seed, "cpu", "fp32")
    return ex.bucket[1] > 1


@pytest.mark.gpu
@pytest.mark.parametrize("name", cases.VARIANTS)
@pytest.mark.parametrize("prop", ["matches_fp64", "extreme_gates", "causality", "split_sequence",
                                  "poisoned_outputs"])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_gpu_properties_forward_and_backward(name, prop, dtype):
    # the campaign's properties (outputs and gradients) at real shapes on the GPU, one
    # drawn example each; `chunkproof fuzz --device cuda` runs many more
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("pytest -m gpu needs CUDA and TRITON_INTERPRET unset")
    ok, err, tol, rec = check(name, prop, 1, "cuda", dtype)
    assert ok, f"{rec['example']}: {rec['detail']} (error {err:.2e} > {tol:.1e})"
