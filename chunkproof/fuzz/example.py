"""One fuzz example: everything its inputs are a pure function of (shape, regime, the
seed of the tensor values), and a one-line form of it that parses back, so that a
shrunk failure is printed, pinned in tests/fuzz_failures.json and replayed
(`chunkproof fuzz --replay`) without Hypothesis."""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from .cases import BETAS, GATES, make_inputs

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Example:
    variant: str
    prop: str
    device: str
    dtype: str
    B: int
    T: int
    H: int
    K: int
    V: int
    h0: bool = False
    fs: bool = True           # output_final_state
    gates: str = "typical"
    beta: str = "random"
    seed: int = 0
    split: int = 0            # a position 1 <= p < T (causality, split_sequence)

    @property
    def bucket(self):
        return (self.B, self.T, self.H, self.K, self.V)

    def describe(self):
        """The shape and regime as `key=value` words; parse() reads them back."""
        words = [f"B={self.B}", f"T={self.T}", f"H={self.H}", f"K={self.K}", f"V={self.V}",
                 f"h0={self.h0}", f"fs={self.fs}", f"gates={self.gates}"]
        if uses_beta(self.variant):
            words.append(f"beta={self.beta}")
        if self.split:
            words.append(f"p={self.split}")
        return " ".join(words + [f"seed={self.seed}"])

    def replay_command(self):
        return (f"chunkproof fuzz --variant {self.variant} --property {self.prop} --device {self.device} "
                f"--dtype {self.dtype} --replay '{self.describe()}'")

    def inputs(self, seed_offset=0):
        return make_inputs(self.variant, *self.bucket, seed=self.seed + seed_offset,
                           dtype=DTYPES[self.dtype], device=self.device, h0=self.h0,
                           gates=self.gates, beta=self.beta)


def uses_beta(variant):
    # dplr draws its a, b from beta too (a = -beta u); any other variant, where its
    # recurrence has a beta-kind input (the delta rules')
    if variant == "dplr_delta_rule":
        return True
    from chunkproof.codegen.variants import BY_NAME
    from .oracle import recurrence_of
    v = BY_NAME.get(variant)
    return v is not None and any(i.kind == "beta" for i in recurrence_of(v)[0].inputs)


_TYPES = {f.name: f.type for f in fields(Example)}
_ALIASES = {"p": "split"}


def parse(text, variant, prop, device, dtype, **defaults) -> Example:
    """An Example from describe()'s words.  Words that are not `key=value` are skipped:
    the records of the seed-drawn campaign (before Hypothesis) wrote the dtype and a
    schedule as bare words, and they still parse (their seed comes in `defaults`)."""
    kw = dict(defaults)
    for word in text.split():
        if "=" not in word:
            continue
        key, _, val = word.partition("=")
        key = _ALIASES.get(key, key)
        kind = _TYPES.get(key)
        if kind is None or key in ("variant", "prop", "device", "dtype"):
            raise ValueError(f"{word!r}: unknown field (fields: B T H K V h0 fs gates beta p seed)")
        if kind == "bool":
            if val not in ("True", "False"):
                raise ValueError(f"{word!r}: expected True or False")
            kw[key] = val == "True"
        elif kind == "int":
            kw[key] = int(val)
        else:
            kw[key] = val
    missing = [k for k in ("B", "T", "H", "K", "V") if k not in kw]
    if missing:
        raise ValueError(f"{text!r}: no {', '.join(missing)}")
    if kw.get("gates", "typical") not in GATES or kw.get("beta", "random") not in BETAS:
        raise ValueError(f"{text!r}: gates is one of {', '.join(GATES)}; beta one of {', '.join(BETAS)}")
    return Example(variant, prop, device, dtype, **kw)
