"""`chunkproof fuzz`: the Hypothesis campaign runs, its properties catch broken kernels,
a failure is shrunk to the smallest example that still fails, and what campaigns pinned
(the example database tests/fuzz_db, the records in tests/fuzz_failures.json) is
replayed here."""
import json
import os
import shlex

import pytest
import torch
from hypothesis import given, settings, strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ReadOnlyDatabase

from chunkproof import cli, cmd_fuzz
from chunkproof.fuzz import cases, pins, strategies
from chunkproof.fuzz.campaign import Cell, check, run_campaign, run_cell, save_failures
from chunkproof.fuzz.example import Example, parse
from chunkproof.fuzz.properties import PROPERTIES, applies
from chunkproof.fuzz.search import REPLAY_PHASES, database_key, search
from chunkproof.fuzz.strategies import examples as example_strategy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAVED = os.path.join(ROOT, "tests", "fuzz_failures.json")
DB = os.path.join(ROOT, "tests", "fuzz_db")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else [])


def _pinned():
    return [r for r in pins.load(SAVED) if r["device"] in DEVICES]


@pytest.mark.parametrize("rec", _pinned(), ids=lambda r: f"{r['variant']}-{r['property']}-{r['dtype']}-{r['example']}")
def test_pinned_failures_now_pass(rec):
    ok, err, tol, out = check(pins.example_of(rec))
    assert ok, f"{out['example']}: {out['detail']} (error {err:.2e} > {tol:.1e})"


def test_every_pinned_record_parses():
    # the CUDA records are not run here, but a record that no longer parses would be lost
    for rec in pins.load(SAVED):
        ex = pins.example_of(rec)
        assert ex.describe() == rec["example"] or "seed" in rec, rec


@pytest.mark.parametrize("device", DEVICES)
def test_the_example_database_replays(device):
    # the campaign's keys (database_key) on the committed database: Hypothesis's reuse
    # phase runs every entry saved under them; read-only, so a test never edits it
    db = ReadOnlyDatabase(DirectoryBasedExampleDatabase(DB))
    failing = []
    for v in cases.VARIANTS:
        for p in [p for p in PROPERTIES if applies(p, v)]:
            for dtype in ("fp32", "bf16", "fp16"):
                def fails(ex):
                    ok, err, tol, rec = check(ex)
                    if not ok:
                        failing.append(f"{ex.replay_command()}: {rec['detail']}")
                    return not ok
                search(example_strategy(v, p, device, dtype), fails, key=database_key(v, p, device, dtype),
                       database=db, max_examples=1, seed=0, phases=REPLAY_PHASES)
    assert not failing, "\n".join(failing)


def test_campaign_cli_prints_the_table(capsys):
    rc = cli.main(["fuzz", "--variant", "kda", "--examples", "1", "--no-save", "--no-db", "-q",
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
        elif how == "off_from_T_50":    # only sequences of 50 steps or more
            o = o * 1.001 if o.shape[1] >= 50 else o
        elif how == "skips_last_row":   # the last position is never written
            o = o.clone()
            o[:, -1:] = mod.torch.empty_like(o[:, -1:])
        return o, ht
    monkeypatch.setattr(mod, cases.API[name], fn)


def _example(name, prop, **kw):
    # a partial chunk, K != V, a state across the cut: small, for the interpreter's time
    split = 17 if prop in ("causality", "split_sequence") else 0
    base = dict(B=1, T=40, H=1, K=16, V=8, h0=True, fs=True, seed=3, split=split)
    return Example(name, prop, "cpu", "fp32", **dict(base, **kw))


@pytest.mark.parametrize("how, prop", [("peeks_ahead", "causality"), ("ignores_state", "split_sequence"),
                                       ("off_by_a_little", "matches_fp64"), ("skips_last_row", "poisoned_outputs")])
def test_properties_catch_broken_kernels(monkeypatch, how, prop):
    ex = _example("gated_delta_rule", prop)
    assert check(ex)[0]
    _broken(monkeypatch, ex.variant, how)
    ok, err, tol, rec = check(ex)
    assert not ok and rec["detail"], rec


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
    ex = _example("kda", prop)
    assert check(ex)[0]
    _broken_backward(monkeypatch, ex.variant, how)
    ok, err, tol, rec = check(ex)
    assert not ok and rec["detail"], rec


@pytest.fixture(scope="module")
def shrunk(tmp_path_factory):
    """A campaign of gla's matches_fp64 against a kernel wrong from T = 50 on, saving
    into a fresh database: (cell, database)."""
    mp = pytest.MonkeyPatch()
    _broken(mp, "gla", "off_from_T_50")
    # head dims up to 16, not 64: the interpreter's time, not the shrinking, is what they add
    mp.setitem(strategies.SPACES, "cpu", dict(strategies.SPACES["cpu"], K=16, V=16))
    db = DirectoryBasedExampleDatabase(str(tmp_path_factory.mktemp("fuzz_db")))
    cell = Cell()
    try:
        run_cell(cell, "gla", "matches_fp64", "cpu", "fp32", 20, 0, db)
    finally:
        mp.undo()
    return cell, db


def test_a_failure_is_found_and_shrunk_to_the_smallest_example(shrunk):
    cell, _ = shrunk
    assert cell.failures == 1 and cell.shrinks > 0, cell
    rec = cell.failed[0]
    # the bug needs T >= 50 and nothing else: everything else shrinks to its simplest
    assert rec["example"] == "B=1 T=50 H=1 K=1 V=1 h0=False fs=False gates=typical seed=0", rec
    assert "--replay 'B=1 T=50 H=1" in rec["replay"]


def test_the_database_replays_the_shrunk_failure_first(shrunk, monkeypatch):
    _, db = shrunk
    _broken(monkeypatch, "gla", "off_from_T_50")
    seen = []

    def fails(ex):
        seen.append(ex)
        return not check(ex)[0]
    assert search(example_strategy("gla", "matches_fp64", "cpu", "fp32"), fails,
                  key=database_key("gla", "matches_fp64", "cpu", "fp32"), database=ReadOnlyDatabase(db),
                  max_examples=1, seed=0, phases=REPLAY_PHASES)
    assert seen[0].T == 50
    monkeypatch.undo()       # the bug fixed: the replayed example passes
    assert not search(example_strategy("gla", "matches_fp64", "cpu", "fp32"), fails,
                      key=database_key("gla", "matches_fp64", "cpu", "fp32"), database=ReadOnlyDatabase(db),
                      max_examples=1, seed=0, phases=REPLAY_PHASES)


def test_the_replay_command_runs_the_shrunk_example(shrunk, monkeypatch, capsys):
    args = shlex.split(shrunk[0].failed[0]["replay"])[1:]
    assert cli.main(args) == 0 and "passes" in capsys.readouterr().out
    _broken(monkeypatch, "gla", "off_from_T_50")
    assert cli.main(args) == 1 and "FAILS" in capsys.readouterr().out


@settings(max_examples=50, deadline=None, database=None)
@given(st.data())
def test_an_example_parses_back_from_its_description(data):
    v = data.draw(st.sampled_from(cases.VARIANTS))
    p = data.draw(st.sampled_from(list(PROPERTIES)))
    ex = data.draw(example_strategy(v, p, "cpu", "fp32"))
    assert parse(ex.describe(), v, p, "cpu", "fp32") == ex


def _fake_check(outcome):
    """campaign.check without a kernel: examples recorded, each `outcome(ex)` (ok)."""
    seen = []

    def fake(ex):
        seen.append(ex)
        ok = outcome(ex)
        return ok, (0.0 if ok else float("inf")), 1e-4, dict(
            variant=ex.variant, property=ex.prop, device=ex.device, dtype=ex.dtype, example=ex.describe(),
            error=0.0 if ok else "inf", tolerance=1e-4, detail="fake", kind=None if ok else "over tolerance")
    return fake, seen


def test_the_seed_makes_a_campaign_reproducible(monkeypatch):
    from chunkproof.fuzz import campaign
    runs = []
    for seed in (4, 4, 5):
        fake, seen = _fake_check(lambda ex: True)
        monkeypatch.setattr(campaign, "check", fake)
        run_cell(Cell(), "kda", "causality", "cpu", "fp32", 8, seed, None)
        runs.append([ex.describe() for ex in seen])
    assert runs[0] == runs[1] and runs[0] != runs[2] and len(set(runs[0])) > 4


def test_a_crash_is_a_recorded_failure(monkeypatch):
    mod = cases.module("gla")

    def boom(*a, **k):
        raise RuntimeError("kernel exploded")
    monkeypatch.setattr(mod, "chunk_gla", boom)
    cells = run_campaign(["gla"], ["matches_fp64"], "cpu", "fp32", 2, 0, quiet=True)
    c = cells[("matches_fp64", "gla")]
    assert c.failures == 1 and "kernel exploded" in c.failed[0]["detail"]
    assert c.failed[0]["example"].startswith("B=1 T=1 H=1 K=1 V=1 ")


def test_failures_are_pinned_once_and_replay(tmp_path, monkeypatch):
    from chunkproof.fuzz import campaign
    fake, _ = _fake_check(lambda ex: ex.T < 9)
    monkeypatch.setattr(campaign, "check", fake)
    cells = run_campaign(["gla"], ["causality"], "cpu", "fp32", 20, 5, quiet=True)
    path = str(tmp_path / "f.json")
    assert save_failures(path, cells) == 1
    assert save_failures(path, cells) == 0
    (rec,) = json.loads(open(path).read())
    assert set(rec) == {"variant", "property", "device", "dtype", "example", "error", "tolerance", "detail"}
    assert pins.example_of(rec).T == 9


def test_seed_drawn_records_still_replay_the_same_inputs():
    # a record of the campaign before Hypothesis: seed apart, dtype and schedule as bare words
    old = {"variant": "kda", "property": "causality", "seed": 3, "device": "cpu", "dtype": "fp32",
           "example": "B=1 T=37 H=2 K=16 V=32 fp32 h0=True fused gates=typical beta=random p=9"}
    ex = pins.example_of(old)
    assert (ex.bucket, ex.seed, ex.split, ex.fs) == ((1, 37, 2, 16, 32), 3, 9, True)
    args, _, _ = ex.inputs()
    want, _, _ = cases.make_inputs("kda", 1, 37, 2, 16, 32, seed=3, h0=True)
    assert all(torch.equal(a, b) for a, b in zip(args, want))


def test_interrupt_keeps_and_saves_what_ran(tmp_path, monkeypatch, capsys):
    from chunkproof.fuzz import campaign
    fake, seen = _fake_check(lambda ex: ex.T < 5)

    def check_then_interrupt(ex):     # Ctrl-C as the shrinking of the first failure starts
        if seen and seen[-1].T >= 5:
            raise KeyboardInterrupt
        return fake(ex)
    monkeypatch.setattr(campaign, "check", check_then_interrupt)
    path = tmp_path / "f.json"
    rc = cli.main(["fuzz", "--variant", "gla", "--property", "matches_fp64", "--examples", "5", "-q",
                   "--save", str(path), "--db", str(tmp_path / "db")])
    out = capsys.readouterr().out
    assert rc == 130 and "interrupted" in out and f"| matches_fp64 | gla | {len(seen)} | 1 |" in out
    assert f"{seen[-1].describe()} (interrupted while shrinking" in out
    assert len(json.loads(path.read_text())) == 1


def test_bad_arguments_are_input_errors(capsys):
    assert cli.main(["fuzz", "--variant", "nope", "--examples", "1"]) == cli.EXIT_INPUT
    assert "unknown variant 'nope'" in capsys.readouterr().err
    assert cli.main(["fuzz", "--variant", "gla", "--examples", "0"]) == cli.EXIT_INPUT
    assert cli.main(["fuzz", "--variant", "gla", "--property", "nope", "--examples", "1"]) == cli.EXIT_INPUT
    assert cli.main(["fuzz", "--variant", "gla", "--property", "causality", "--replay", "T=3"]) == cli.EXIT_INPUT
    assert "no B, H, K, V" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert cli.main(["fuzz", "--device", "cuda", "--examples", "1"]) == cli.EXIT_INPUT
        assert "no CUDA device" in capsys.readouterr().err


def test_a_derivation_file_without_a_kernel_is_refused_with_a_reason(tmp_path, capsys):
    # (a file that declares one is fuzzed: tests/test_fuzz_user.py)
    f = tmp_path / "deltanet.py"
    f.write_text("# a user's derivation\n")
    assert cli.main(["fuzz", str(f)]) == cli.EXIT_INPUT
    err = capsys.readouterr().err
    assert "defines no DERIVATION" in err and "Traceback" not in err


def test_the_command_line_names_every_property():
    # cmd_fuzz lists them without importing torch
    assert tuple(PROPERTIES) == cmd_fuzz.PROPERTY_NAMES


@pytest.mark.parametrize("name", cases.VARIANTS)
def test_gradient_oracle_matches_finite_differences(name):
    # the fp64 autograd oracle the backward kernels are fuzzed against
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


GPU_EXAMPLES = {   # real shapes: T past 2048, a partial chunk, T = 1, K != V
    "matches_fp64": dict(B=1, T=2049, H=3, K=128, V=64, h0=True, seed=1),
    "extreme_gates": dict(B=2, T=1000, H=4, K=128, V=64, h0=True, gates="underflow", beta="zero", seed=1),
    "causality": dict(B=2, T=333, H=3, K=128, V=64, h0=True, split=100, seed=1),
    "split_sequence": dict(B=1, T=2049, H=3, K=128, V=64, h0=True, split=1000, seed=1),
    "poisoned_outputs": dict(B=3, T=1, H=2, K=128, V=64, h0=True, seed=1),
    "grouped_heads": dict(B=1, T=1000, H=2, K=128, V=64, h0=True, seed=1),
    "l2norm_in_kernel": dict(B=2, T=333, H=3, K=128, V=64, h0=True, seed=1),
    "packed_sequences": dict(B=3, T=1000, H=2, K=128, V=64, h0=True, split=333, seed=1),
    "recurrent_form": dict(B=2, T=300, H=2, K=128, V=64, h0=True, seed=1),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name, prop", [(n, p) for n in cases.VARIANTS for p in GPU_EXAMPLES if applies(p, n)])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_gpu_properties_forward_and_backward(name, prop, dtype):
    # the campaign's properties (outputs and gradients) at real shapes on the GPU, one
    # example each; `chunkproof fuzz --device cuda` runs many more
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.fail("pytest -m gpu needs CUDA and TRITON_INTERPRET unset")
    ok, err, tol, rec = check(Example(name, prop, "cuda", dtype, **GPU_EXAMPLES[prop]))
    assert ok, f"{rec['example']}: {rec['detail']} (error {err:.2e} > {tol:.1e})"


def test_poisoned_buffers_catch_a_write_past_the_end():
    # the guard tail of poisoned_outputs' buffers: a kernel that stores 4 elements past an
    # 8-element buffer (under the interpreter, which writes through, as the GPU does)
    import triton
    import triton.language as tl
    from chunkproof.fuzz.properties import _PoisonedTorch

    @triton.jit
    def past_end(p, N: tl.constexpr):
        o = tl.arange(0, N)
        tl.store(p + o + 4, o.to(tl.float32))
    pt = _PoisonedTorch()
    t = pt.empty(2, 4)
    assert torch.isnan(t).all() and pt.overwritten() == []
    past_end[(1,)](t, N=8)
    assert pt.overwritten() == [((2, 4), 4)]


def test_an_option_property_runs_only_where_the_function_has_the_option(capsys):
    from chunkproof.fuzz.campaign import run_campaign
    cells = run_campaign(["gla", "delta_rule"], ["l2norm_in_kernel"], "cpu", "fp32", 1, 0, quiet=True)
    assert set(cells) == {("l2norm_in_kernel", "delta_rule")} and cells[("l2norm_in_kernel", "delta_rule")].examples
    assert cli.main(["fuzz", "--variant", "gla", "--property", "l2norm_in_kernel", "--examples", "1",
                     "--no-save", "--no-db", "-q"]) == 2
    assert "applies to none of gla" in capsys.readouterr().err
