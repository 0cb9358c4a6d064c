"""Where the time goes: device time per launched kernel, ours (one row per TILING
configuration) and optionally FLA's, under torch.profiler on the GPU, of the forward or
(--mode fwd+bwd) the forward and backward of L = <dO, O> + <dS_T, S_T> with an initial state.

    python benchmarks/profile_kernels.py --out $OUT/profile.md [--mode fwd+bwd] \
        [--variants gla,kda] [--configs "KEY=VALUE;KEY=VALUE,KEY2=VALUE2"] [--fla gated_delta_rule [--fla-force]]

A config is a comma-separated list of TILING overrides (JSON values, else the bare
word); configs are separated by ';'; the empty config is the module's own TILING (the
default: one row).  Each (variant, config) gets its total time (do_bench median) and, per
kernel, the launches per call and the mean device time per call, and every tensor's
error against the fp64 recurrence on the first 256 steps under that configuration (as
`chunkproof bench` gates them).  Inputs:
chunkproof.bench.inputs at the same shape (the forward alone: no initial state).

--narrow "hr0,vr1;vr4" adds a row per entry and config: the variant printed with those
passed tiles in the inputs' dtype besides the ones its precision record narrows
(chunkproof.bench.printed, into a temporary package), under each --configs entry, with
every tensor's error against the fp64 recurrence on the first 256 steps (as `chunkproof
bench` gates), beside the module's own (and FLA's, with --fla), to weigh what narrowing
them gives against what it costs."""
import sys
import time

import torch

from chunkproof.bench import args as A, calls, fla, gate, inputs, printed, tiling, timing

PROG = "profile_kernels.py"


def section(title, total_ms, rows):
    lines = [f"### {title}: {total_ms:.4f} ms (do_bench median)", "",
             "| kernel | launches/call | us/call | share |", "|---|---|---|---|"]
    tot = sum(us for _, us in rows.values()) or 1.0
    for name, (n, us) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| `{name[:80]}` | {n:g} | {us:.1f} | {100 * us / tot:.0f}% |")
    return "\n".join(lines) + "\n"


def autotune_picks(mod):
    """What triton.autotune picked for each of ``mod``'s kernels so far, per tuning key
    (the runtime's autotuned kernels; empty with autotune off)."""
    rt = sys.modules[mod.__name__.rsplit(".", 1)[0] + "._runtime"]
    lines = []
    for (fn, _, _), tuner in rt._AUTOTUNED.items():
        if getattr(mod, getattr(fn, "__name__", ""), None) is not fn:
            continue
        for key, cfg in tuner.cache.items():
            picked = " ".join(f"{k}={v}" for k, v in sorted(cfg.kwargs.items()))
            lines.append(f"- `{fn.__name__}` key {key}: {picked} warps {cfg.num_warps} stages {cfg.num_stages}")
    return "\n".join(["autotune picked:"] + sorted(lines)) + "\n" if lines else ""


def parse(argv):
    p = A.Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--out", default=None)
    p.add_argument("--variants", default="all")
    p.add_argument("--configs", default="", help="';'-separated TILING override lists ('' = the module's own)")
    p.add_argument("--fla", default="", help="variants whose FLA call (the same mode) is profiled too (autotunes: slow)")
    p.add_argument("--fla-force", action="store_true",
                   help="run FLA's gated backward where it refuses it on Hopper with Triton < 3.7.1 (its #640)")
    p.add_argument("--shape", default="4,4096,16,128", help="B,T,H,D")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--mode", choices=["fwd", "fwd+bwd"], default="fwd")
    p.add_argument("--budget", type=float, default=1e9, help="stop starting new configs after this many seconds")
    p.add_argument("--narrow", default="", help="';'-separated lists of passed tiles to print narrowed besides the "
                                                "record's (a row each under each config, with its errors; the defaults' too)")
    a = p.parse_args(argv)
    a.variants = A.variants(a.variants)
    a.fla = A.variants(a.fla) if a.fla.strip() else []
    a.shape = A.shape(a.shape)
    a.torch_dtype = A.dtype(a.dtype)
    a.configs = [(text.strip(), tiling.parse_overrides(text)) for text in a.configs.split(";")]
    for v in a.variants:     # an unknown key is refused before anything runs
        for _, cfg in a.configs:
            with tiling.applied(calls.ours(v)[0], cfg):
                pass
    a.narrow = [tuple(t.strip() for t in e.split(",") if t.strip()) for e in a.narrow.split(";") if e.strip()]
    for v in a.variants:     # an unknown tile is refused before anything runs
        for tiles in a.narrow:
            try:
                printed.check_tiles(v, tiles)
            except ValueError as e:
                raise ValueError(f"--narrow: {e}") from None
    if not torch.cuda.is_available():
        raise ValueError("needs a CUDA GPU")
    return a


GATE_T = 256


def errors(variant, fn, mode, x, h0, do, dht, scale):
    """Each output's and gradient's relative RMS error against the fp64 recurrence on the
    first GATE_T steps, as chunkproof bench's gate measures them."""
    t = min(GATE_T, next(iter(x.values())).shape[1])
    xp, dop = inputs.first_steps(x, t), do[:, :t].contiguous()
    ref = gate.Reference(variant, xp, h0, dop, dht, scale)
    if mode == "fwd":
        (o, ht), grads = calls.forward(fn, xp, h0, scale), None
    else:
        o, ht, grads = calls.fwd_bwd_state(fn, xp, h0, dop, dht, scale)
    return gate.judge(ref, {"o": o, "final_state": ht}, grads, gate.base_tolerance(do.dtype)).errors


def error_line(who, errs):
    """One markdown line of every tensor's error, worst first."""
    return f"- {who}: " + ", ".join(f"{k} {v:.2e}" for k, v in sorted(errs.items(), key=lambda kv: -kv[1])) + "\n"


def main(argv=None):
    try:
        a = parse(sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        return A.fail(PROG, e)
    B, T, H, D = a.shape
    scale = D ** -0.5
    t0 = time.time()
    parts = [f"# Kernel profile, {a.mode}\n\n- GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; "
             f"shape (B, T, H, D) = ({B}, {T}, {H}, {D}) {a.dtype}; {a.iters} profiled calls\n"]

    def write():
        if a.out:
            with open(a.out, "w") as f:
                f.write("\n".join(parts))

    for variant in a.variants:
        x = inputs.bench_inputs(variant, B, T, H, D, a.torch_dtype, torch.float32, "cuda", seed=0)
        h0, do, dht = inputs.cotangents(B, T, H, D, D, a.torch_dtype, "cuda")
        mod, fn = calls.ours(variant)

        def run(f):
            return calls.of_mode(a.mode, f, x, h0, do, dht, scale)
        parts.append(f"## {variant}\n")
        for text, cfg in a.configs:
            label = f"ours [{text or 'defaults'}]"
            if time.time() - t0 > a.budget:
                parts.append(f"(budget reached; {variant} {label} not run)\n")
                break
            try:
                with tiling.applied(mod, cfg):
                    call = run(fn)
                    t = time.time()
                    rows = timing.kernel_times(call, a.iters)
                    ms = timing.median_ms(call, True, 1, 50, 200)
                    # each configuration's own outputs: a tiling the GPU miscompiles shows here
                    errs = errors(variant, fn, a.mode, x, h0, do, dht, scale)
                print(f"[{variant}] {label} {ms:.4f} ms ({time.time() - t:.1f} s)", file=sys.stderr)
                parts.append(section(label, ms, rows) + f"errors against fp64 (relative RMS, first {GATE_T} steps):\n\n"
                             + error_line("ours", errs) + autotune_picks(mod))
            except Exception as e:  # noqa: BLE001  (one bad config must not hide the rest)
                parts.append(f"### {label}: failed: {type(e).__name__}: {str(e)[:300]}\n")
            write()
        recorded_err = []     # the record's own module, measured once for every --narrow row
        narrowed = {}         # each --narrow entry printed once, for every config
        for tiles, (text, cfg) in ((t, c) for t in a.narrow for c in a.configs):
            label = f"ours [narrowed besides the record's: {', '.join(tiles)}{'; ' + text if text else ''}]"
            if time.time() - t0 > a.budget:
                parts.append(f"(budget reached; {variant} {label} not run)\n")
                break
            try:
                if tiles not in narrowed:
                    narrowed[tiles] = printed.narrowed(variant, tiles)
                nmod, nfn = narrowed[tiles]
                if not recorded_err:
                    recorded_err.append(errors(variant, fn, a.mode, x, h0, do, dht, scale))
                with tiling.applied(nmod, cfg):
                    call = run(nfn)
                    rows = timing.kernel_times(call, a.iters)
                    ms = timing.median_ms(call, True, 1, 50, 200)
                    mine = errors(variant, nfn, a.mode, x, h0, do, dht, scale)
                errs = (f"errors against fp64 (relative RMS, first {GATE_T} steps):\n\n"
                        + error_line("narrowed", mine) + error_line("the record's", recorded_err[0]))
                print(f"[{variant}] {label} {ms:.4f} ms", file=sys.stderr)
                parts.append(section(label, ms, rows) + errs + autotune_picks(nmod))
            except Exception as e:  # noqa: BLE001  (one bad row must not hide the rest)
                parts.append(f"### {label}: failed: {type(e).__name__}: {str(e)[:300]}\n")
            write()
        if variant in a.fla:
            try:
                f = fla.load(variant, force=a.fla_force)
                call = run(f)
                rows = timing.kernel_times(call, a.iters)
                ms = timing.median_ms(call, True, 1, 50, 200)
                parts.append(section(f"FLA {fla.version()} ({fla.ENTRY[variant][0]}; backend "
                                     f"{fla.backend(variant, tuple(x.values()))}"
                                     f"{'; forced past #640' if a.fla_force else ''})", ms, rows)
                             + f"errors against fp64 (relative RMS, first {GATE_T} steps):\n\n"
                             + error_line("FLA", errors(variant, f, a.mode, x, h0, do, dht, scale)))
            except Exception as e:  # noqa: BLE001
                parts.append(f"### FLA: failed: {type(e).__name__}: {str(e)[:300]}\n")
            write()
    write()
    print("\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
