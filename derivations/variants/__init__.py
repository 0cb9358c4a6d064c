"""The derivations the shipped kernels of issue 17 are printed from: DeltaNet
(delta_rule.py), the scalar log-gate form of Mamba2 / SSD (simple_gla.py), RetNet
(retention.py) and RWKV-6 (rwkv6.py).  Each is a chunk program checked against its
recurrence, with forward claims and an adjoint claim for every input and parameter;
tile names and layouts follow FLA's arguments (q, k [B, T, H, K], v [B, T, H, V],
log-space gates) with the state S in the notes' V x K convention."""
