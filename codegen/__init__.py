"""Triton code generation from verified claims (issue: kernels from formulas).

Nothing is generated yet; the generator arrives with the forward-kernel issue."""
