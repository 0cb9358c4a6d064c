"""A plain PyTorch chunked implementation of a generated kernel, evaluated from the
kernel's own chunk program: the accuracy baseline of the precision planner
(codegen/precision.py) and of benchmarks/bf16_vs_chunked.py.

The derivation's chunk program (the forms its kernel(...) declaration names for O_[t]
and S_[t], or with form="program" the program's own definitions) is evaluated chunk by
chunk on torch tensors of one dtype by the checker's evaluator
(chunkproof.verify.evaluate.BlockEval over a torch field): every op's result in that
dtype (a matmul accumulates as torch's does, then rounds once); a triangular inverse is
taken in fp32 and cast back; the state is carried across chunks in that dtype.  With
logs="fp32" the gates are held in fp32, as FLA holds them: every log-space node (the
checker's own log typing) and every node computed from gates alone (a gate argument,
a per-head fixed decay, their products and ratios) stays fp32, every other node is
rounded.  Gradients by torch autograd through that graph.  Nothing here knows a
variant by name."""
import torch

from chunkproof.derivations import ir

GATES = torch.float64

def torch_field(dtype):
    """The checker's float field on torch tensors of ``dtype`` (also the tests' fp64 one)."""
    from chunkproof.verify.fields import Float

    class TorchField(Float):
        """The checker's float field on torch tensors of one dtype: every op's result
        in ``dtype``; the inverse in fp32 (cast back) when ``dtype`` is narrower."""
        exact = False

        def __init__(self):
            super().__init__()
            self.name = f"torch {dtype}"
            self.dtype = dtype

        def const(self, a):
            return torch.as_tensor(a).to(dtype)

        def eye(self, n):
            return torch.eye(n, dtype=dtype)

        def zeros(self, r, c):
            return torch.zeros(r, c, dtype=dtype)

        def ones(self, r, c):
            return torch.ones(r, c, dtype=dtype)

        def inv(self, a):
            if dtype in (torch.float32, torch.float64):
                return torch.linalg.inv(a)
            return torch.linalg.inv(a.float()).to(dtype)

        def matmul(self, a, b):
            if a.dtype != b.dtype:     # a gate kept wide (logs="wide") meets a narrow tile
                dt = torch.promote_types(a.dtype, b.dtype)
                a, b = a.to(dt), b.to(dt)
            return a @ b

        def exp(self, a):
            return torch.exp(a)

        def log(self, a):
            return torch.log(a)

        def T(self, a):
            return a.transpose(-1, -2)

        def vstack(self, xs):
            return torch.cat(xs, dim=-2)

        def hstack(self, xs):
            return torch.cat(xs, dim=-1)

    return TorchField()


def _evaluator(dtype, logs_fp32, gates=frozenset()):
    """BlockEval; with ``logs_fp32`` every log-space node (evaluate._LOG_TYPED) and every
    node computed from ``gates`` alone (tile and parameter names, and the definitions
    built from them only) is kept in fp32, and every other node's value is rounded to
    ``dtype``, as an implementation that holds its gates in fp32 (FLA's convention)."""
    from chunkproof.verify import evaluate as E
    if not logs_fp32:
        return E.BlockEval

    class MixedEval(E.BlockEval):
        def gate_only(self, e):
            leaves = [n for n in ir.walk(e) if isinstance(n, ir.Var)]
            return bool(leaves) and all(self._gate_name(n.name) for n in leaves)

        def _gate_name(self, name):
            name = self.alias.get(name, name)
            memo = self.__dict__.setdefault("_gates", {})
            if name not in memo:
                memo[name] = False          # a recursion through a definition is no gate
                memo[name] = name in gates or self.is_log(name) or (
                    name in self.defs and name not in self.recs and self.gate_only(self.defs[name]))
            return memo[name]

        def visit(self, e, env):
            val = super().visit(e, env)
            if torch.is_tensor(val) and val.dtype != dtype and not (
                    E._LOG_TYPED.visit(e, self) or self.gate_only(e)):
                val = val.to(dtype)
            return val
    return MixedEval


class Chunked:
    """A plain chunked implementation of variant ``name`` built from its kernel's chunk
    program (nothing here knows a variant by name)."""

    def __init__(self, name, form="kernel", C=None, logs="bf16"):
        from chunkproof.codegen.plan import _claim, derivation_of
        from chunkproof.codegen.variants import BY_NAME
        self.v = v = BY_NAME[name]
        self.deriv = d = derivation_of(v)
        self.prog = d.programs[v.program]
        self.rec_name = d.program_recurrence[v.program]
        self.rec = d.recurrences[self.rec_name]
        if form == "kernel":       # the claims the kernel is printed from
            self.o_expr = _claim(d, v.out_claim).rhs
            self.s_expr = _claim(d, v.state_claim).rhs
        elif form == "program":    # the program's own definitions
            defs = dict(self.prog.defs)
            self.o_expr, self.s_expr = defs[self.prog.output], defs[self.prog.state]
        else:
            raise ValueError(f"unknown form {form!r}; choose from kernel, program")
        self.form = form
        if logs not in ("bf16", "wide"):
            raise ValueError(f"unknown log-gate precision {logs!r}; choose from bf16, wide")
        self.logs = logs
        if C is None:
            from chunkproof.fuzz.cases import module
            C = int(module(name).TILING.BT) if hasattr(module(name), "TILING") else 64
        self.C = C
        self.bindings = [p for k in d.kernels if k.module == v.name for p in k.params]
        self.decl = d.parameters()
        self.by_tile = {i.seq: i for i in self.rec.inputs}

    def has_gates(self):
        """Whether logs="wide" differs from all-``dtype``: the kernel reads a gate."""
        return (any(i.kind == "loggate" for i in self.rec.inputs) or
                any(a.kind.startswith("gate") for a in self.v.args) or
                any(p.kind == "head_log" for p in self.bindings))

    def arg_names(self):
        return [a.name for a in self.v.args] + [p.name for p in self.bindings if p.kind == "head_arg"]

    def _params(self, H, h, dtype, inputs, gate_dtype):
        """name -> value (rows x cols of the declaration) for head h; a fixed per-head
        decay in ``gate_dtype``."""
        out = {}
        for p in self.bindings:
            decl = self.decl[p.name]
            if p.kind == "head_log":
                hh = torch.arange(H, dtype=torch.float64)
                val = torch.exp(eval(p.code, {"torch": torch, "h": hh}))[h]   # noqa: S307 (the declaration's code)
                val = val.reshape(1, 1).to(gate_dtype)
            elif p.kind == "const":
                val = torch.tensor([[p.value]], dtype=dtype)
            else:     # head_arg: an [H, d] input
                val = inputs[p.name][h].reshape(-1, 1)
            if decl.rows == "1" and decl.cols == "1":
                val = val.reshape(1, 1)
            out[p.name] = val
        return out

    def __call__(self, inputs, scale, h0, dtype):
        """o [B, T, H, V] and the final state [B, H, K, V] in ``dtype``, differentiable in
        ``inputs`` (the API's names) and ``h0``.  Inputs are cast to ``dtype`` first."""
        from chunkproof.verify.evaluate import Point, Sizes
        f = torch_field(dtype)
        mixed = self.logs == "wide" and dtype != torch.float64
        gates = {a.tile for a in self.v.args if a.kind.startswith("gate")}
        gates |= {p.name for p in self.bindings if p.kind == "head_log"}
        Eval = _evaluator(dtype, mixed, frozenset(gates))
        x = {n: t.to(dtype) for n, t in inputs.items()}
        q0 = self.v.args[0].name
        B, T, H, K = x[q0].shape
        tiles = {}
        for a in self.v.args:
            keep = mixed and (self.by_tile[a.tile].kind == "loggate" or a.kind.startswith("gate"))
            t = inputs[a.name].to(GATES) if keep else x[a.name]   # a gate kept wide (logs="wide")
            t = t if t.dim() == 4 else t[..., None]           # [B, T, H, d]
            if a.name == q0:
                t = t * scale          # as the kernels do: q times scale (here in dtype)
            if a.kind.startswith("gate"):                        # a log_of() argument
                t = torch.exp(t)
            tiles[a.tile] = t
        Vd = next(tiles[i.seq].shape[-1] for i in self.rec.inputs if i.dim == "Dv")
        S0 = h0.to(dtype) if h0 is not None else torch.zeros(B, H, K, Vd, dtype=dtype)
        o = [[None] * H for _ in range(B)]
        hts = [[None] * H for _ in range(B)]
        for b in range(B):
            for h in range(H):
                params = self._params(H, h, dtype, x, GATES if mixed else dtype)
                S = S0[b, h].transpose(0, 1)                   # V x K, the program's state
                outs = []
                for lo in range(0, T, self.C):
                    hi = min(T, lo + self.C)
                    seq = {n: t[b, lo:hi, h] for n, t in tiles.items()}
                    pt = Point(self.deriv, self.rec_name, f, Sizes(C=hi - lo, Dk=K, Dv=Vd, N=1),
                               seq, None, None, None, params)
                    ev = Eval(pt, self.prog, 0, f, S_prev=S)
                    outs.append(ev.ev(self.o_expr, {}))
                    S = ev.ev(self.s_expr, {})
                o[b][h] = torch.cat(outs, dim=0)               # T x V
                hts[b][h] = S.transpose(0, 1)                  # K x V
        o = torch.stack([torch.stack(r, dim=1) for r in o], dim=0)       # [B, T, H, V]
        ht = torch.stack([torch.stack(r, dim=0) for r in hts], dim=0)    # [B, H, K, V]
        return o, ht

    def fwd_bwd(self, inputs, scale, h0, do, dht, dtype):
        """(o, final state, {name: gradient}) of L = <dO, O> + <dS_T, S_T>, by autograd."""
        leaves = {n: t.detach().requires_grad_() for n, t in inputs.items()}
        h0l = h0.detach().requires_grad_()
        with torch.enable_grad():
            o, ht = self(leaves, scale, h0l, dtype)
            loss = (o.double() * do.double()).sum() + (ht.double() * dht.double()).sum()
            grads = torch.autograd.grad(loss, list(leaves.values()) + [h0l])
        return o.detach(), ht.detach(), dict(zip(list(leaves) + ["initial_state"], grads))


# ------------------------------------------------------------------ the comparison
def reference(name, x, h0, do, dht, scale):
    from chunkproof.fuzz.reference import recurrence, reference_grads
    from chunkproof.bench.metrics import reference_names
    ref = reference_names(x)
    o, ht = recurrence(name, scale=scale, initial_state=h0, **ref)
    g = reference_grads(name, ref, do, dht, scale=scale, initial_state=h0)
    return o, ht, {("gk" if n == "g" and "gk" in x else n): t for n, t in g.items()}


def case(name, shape, seed, inputs="fuzz"):
    """(inputs, h0, dO, dS_T) as the fuzz campaign draws them, or (``inputs`` "bench")
    as the benchmark does."""
    from chunkproof.bench.inputs import bench_case, fuzz_case
    B, T, H, K, V = shape
    return {"fuzz": fuzz_case, "bench": bench_case}[inputs](name, B, T, H, K, V, seed)


def errors(o, ht, grads, want):
    from chunkproof.fuzz.reference import rel_rms
    wo, wht, wg = want
    out = {"o": rel_rms(o, wo), "ht": rel_rms(ht, wht)}
    for n, g in grads.items():
        out["d" + ("h0" if n == "initial_state" else n)] = rel_rms(g, wg[n])
    return out
