"""What the benchmark scripts share (benchmarks/, and later `chunkproof bench`): inputs
in FLA's conventions, error metrics (chunkproof.fuzz.reference's), FLA loading, timing
and the generated modules' TILING overrides.  Imports on a machine without CUDA and
without FLA: FLA is imported only by fla.load."""
