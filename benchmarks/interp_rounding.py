"""The H200's rounding under Triton's interpreter: chunkproof.fuzz.rounding (the
precision planner uses it too); this name stays for the benchmark scripts."""
from chunkproof.fuzz.rounding import MODES, emulate, to_bf16_bits, to_tf32  # noqa: F401
