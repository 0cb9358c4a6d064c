"""What the benchmarks share, and `chunkproof bench` itself.

The library (benchmarks/*.py use it): inputs in FLA's conventions (inputs), error
metrics and memory floors (metrics, over chunkproof.fuzz.reference's oracle), FLA
loading and which backend its dispatch ran (fla), timing (timing), calls of either API
(calls), TILING overrides (tiling), command-line values (args).  `chunkproof bench`
(chunkproof/cmd_bench.py is its command line): the loop (runner), the correctness gate
(gate), what is put side by side (sides), the JSON and the table (report).

Every module imports on a machine without CUDA and without FLA, and none imports Triton
at module level: FLA is imported by fla.load alone, Triton by the timing functions and
the kernels, so that TRITON_INTERPRET can still be set by the caller."""
