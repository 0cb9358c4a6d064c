"""chunkproof: chunkwise derivations of linear-attention recurrences, checked
exactly against the unrolled recurrence, and Triton kernels printed from them.

The pipeline, each layer importing only those before it:
    chunkproof.derivations  the formula IR, the DSL, the bundled notes' encodings
    chunkproof.verify       the exact checker and the mismatch report
    chunkproof.codegen      the planner, the Triton printer, `chunkproof gen`
    chunkproof.kernels      the generated kernels (FLA's API): chunk_gla, ...
and above them chunkproof.fuzz (the kernels against the fp64 recurrence) and
chunkproof.cli (the `chunkproof` command).
"""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("chunkproof")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
