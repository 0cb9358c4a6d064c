"""Property-based fuzzing of the generated kernels against the fp64 recurrence
(`chunkproof fuzz`, docs/fuzz.md): inputs from an example's shape, regime and seed
(cases.py, example.py), Hypothesis strategies of examples (strategies.py), the oracle
(reference.py), the properties (properties.py), the search (search.py), the campaign
(campaign.py) and the pinned failures (pins.py)."""
import os

# where shrunk failures go by default (the test suite replays both); here, not in
# campaign.py, so that the command line can name them without importing torch
DEFAULT_SAVE = os.path.join("tests", "fuzz_failures.json")
DEFAULT_DB = os.path.join("tests", "fuzz_db")
