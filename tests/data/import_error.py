from chunkproof.derivations.dsl import Derivation
raise RuntimeError("this derivation is broken on purpose")
