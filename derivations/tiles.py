"""The tiles every chunkwise derivation talks about, in the notes' notation.

Chunk tiles have C rows (the steps tC+1..tC+C of chunk t); ``*seq`` tiles are
the whole sequence (L rows) for the notes' global-index sums.  Vector gates
(GLA, KDA, DPLR) are C x Dk; scalar gates (Gated DeltaNet, Mamba2) C x 1."""
from .dsl import tile

Q = tile("Q", "C", "Dk", r"\mathbf{Q}_{[t]}")
K = tile("K", "C", "Dk", r"\mathbf{K}_{[t]}")
V = tile("V", "C", "Dv", r"\mathbf{V}_{[t]}")
Beta = tile("Beta", "C", "1", r"\boldsymbol{\beta}_{[t]}")

Qseq = tile("Q", "L", "Dk", r"\mathbf{Q}")
Kseq = tile("K", "L", "Dk", r"\mathbf{K}")
Vseq = tile("V", "L", "Dv", r"\mathbf{V}")

# vector gates: alpha_t in R^Dk, Gamma = cumprod(alpha) within the chunk
Alpha = tile("Alpha", "C", "Dk", r"\boldsymbol{\alpha}_{[t]}")
Alphaseq = tile("Alpha", "L", "Dk", r"\boldsymbol{\alpha}")
Gamma = tile("Gamma", "C", "Dk", r"\mathbf{\Gamma}_{[t]}")
gC = tile("gC", "Dk", "1", r"\boldsymbol{\gamma}_{[t]}^{C}")

# decayed tiles: <-X = X (.) Gamma, ->X = X (/) Gamma (arrow pairs drive mutation tests)
Ql = tile("Ql", "C", "Dk", r"\overleftarrow{\mathbf{Q}_{[t]}}", "<", "Q")
Kl = tile("Kl", "C", "Dk", r"\overleftarrow{\mathbf{K}_{[t]}}", "<", "K")
Kr = tile("Kr", "C", "Dk", r"\overrightarrow{\mathbf{K}_{[t]}}", ">", "K")

W = tile("W", "C", "Dk", r"\mathbf{W}_{[t]}")
U = tile("U", "C", "Dv", r"\mathbf{U}_{[t]}")
O = tile("O", "C", "Dv", r"\mathbf{O}_{[t]}")
S = tile("S", "Dv", "Dk", r"\mathbf{S}_{[t]}^{C}")
