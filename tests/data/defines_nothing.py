"""Imports the DSL and defines no DERIVATION."""
from chunkproof.derivations.dsl import Derivation  # noqa: F401

D = None
