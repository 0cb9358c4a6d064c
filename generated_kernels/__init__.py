"""Kernels written by `chunkproof gen` only; none are generated yet."""
