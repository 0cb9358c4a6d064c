"""Variable-length batches against a fixed-length batch of the same total length (issue
19: "varlen within 10% of a fixed-length batch of the same total length").

For each variant and shape (B, T, H, D): the fixed-length call on [B, T, H, D] inputs,
then the same tokens packed along T (B = 1, cu_seqlens) as B sequences of T ("equal":
the same work, cut the same way) and as B sequences of uneven lengths with the same sum
("uneven": chunk counts differ per sequence; the state scans wait for the longest).
Forward, and forward + backward of L = <dO, O> + <dS_T, S_T>; bf16, fp32 gates, an
initial state per sequence.  Times: triton.testing.do_bench medians after warm-up
(chunkproof.bench.timing); the packed outputs must equal the fixed-length ones
(equal) before a time is reported.

    python benchmarks/varlen_vs_fixed.py [--variant gla,kda] [--shape 4,4096,16,128] [--out DIR]
    python benchmarks/varlen_vs_fixed.py --device cpu --variant gla --shape 2,40,2,16

--device cpu runs Triton's interpreter (TRITON_INTERPRET=1, set here before triton is
imported) at the shape given (use a tiny one): the path is exercised, the times mean
nothing.  Writes DIR/varlen.json and DIR/varlen.md (default: print only).
"""
import sys

import torch

from chunkproof.bench import args as A

PROG = "varlen_vs_fixed.py"


def uneven(B, T):
    """B lengths summing to B * T, as unlike as a quarter, a half and the rest of T."""
    if B == 1:
        return [T]
    lens = [max(1, (T * (1 + 2 * (b % 3))) // 4) for b in range(B - 1)]      # at most 5T/4 each, 3T/4 on average
    return lens + [B * T - sum(lens)]


def _offsets(lens, device):
    return torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=device)


def measure(variant, shape, device):
    """Rows {layout, mode, ms, ratio to fixed, max |diff| to fixed (equal only)}."""
    from chunkproof.bench import calls, inputs as I, timing
    B, T, H, D = shape
    _, fn = calls.ours(variant)
    cuda = device == "cuda"
    x = I.bench_inputs(variant, B, T, H, D, torch.bfloat16, torch.float32, device)
    h0, do, dht = I.cotangents(B, T, H, D, D, torch.bfloat16, device)
    timed = {n: t.dim() >= 3 for n, t in x.items()}
    flat = {n: (t.reshape(1, B * T, *t.shape[2:]) if timed[n] else t) for n, t in x.items()}
    do_flat = do.reshape(1, B * T, *do.shape[2:])
    layouts = [("fixed", x, do, None), ("equal", flat, do_flat, _offsets([T] * B, device)),
               ("uneven", flat, do_flat, _offsets(uneven(B, T), device))]
    rows, base, ref = [], {}, None
    for layout, inp, dO, cu in layouts:
        kw = {} if cu is None else dict(cu_seqlens=cu)
        f = (lambda *a, **k: fn(*a, **k, **kw))
        o, _ = calls.forward(f, inp, h0)
        diff = None
        if layout == "fixed":
            ref = o.reshape(1, B * T, *o.shape[2:]).float()
        elif layout == "equal":
            diff = float((o.float() - ref).abs().max())
            if diff != 0.0:
                raise SystemExit(f"{PROG}: {variant} {shape}: the packed equal-length output differs from the "
                                 f"fixed-length one by {diff:.3e}: no time reported")
        for mode, call in (("fwd", lambda: calls.forward(f, inp, h0)),
                           ("fwd+bwd", lambda: calls.fwd_bwd(f, inp, h0, dO, dht))):
            ms = timing.median_ms(call, cuda)
            if layout == "fixed":
                base[mode] = ms
            rows.append(dict(variant=variant, B=B, T=T, H=H, D=D, layout=layout, mode=mode, ms=ms,
                             ratio=ms / base[mode], max_abs_diff=diff,
                             lens=None if cu is None else [int(a) for a in (cu[1:] - cu[:-1]).tolist()]))
    return rows


def table(rows):
    out = ["| variant | shape | layout | mode | ms | ÷ fixed |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['variant']} | ({r['B']}, {r['T']}, {r['H']}, {r['D']}) | {r['layout']} | {r['mode']} | "
                   f"{r['ms']:.3f} | {r['ratio']:.3f} |")
    return "\n".join(out)


def main(argv=None):
    p = A.Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", default="all", help="comma-separated generated variants, or all (default)")
    p.add_argument("--shape", action="append", default=[], help="B,T,H,D (repeatable; default 4,4096,16,128)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: Triton's interpreter (tiny shapes; the times mean nothing)")
    p.add_argument("--out", default="", help="folder for varlen.json and varlen.md (default: print only)")
    a = p.parse_args(argv)
    try:
        variants = A.variants(a.variant)
        shapes = [A.shape(s) for s in a.shape] or [(4, 4096, 16, 128)]
        device = A.device(a.device)
    except ValueError as e:
        return A.fail(PROG, e)
    meta = A.run_meta(device)
    rows = []
    for v in variants:
        for s in shapes:
            rows += measure(v, s, device)
            print(table([r for r in rows if r["variant"] == v and (r["B"], r["T"], r["H"], r["D"]) == s]),
                  flush=True)
            A.write_rows(a.out, "varlen", meta, rows, table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
