"""Property-based fuzzing of the generated kernels against the fp64 recurrence
(`chunkproof fuzz`): inputs drawn from a seed (cases.py), the oracle
(reference.py), the properties (properties.py) and the campaign (campaign.py)."""
import os

# where failing seeds go by default (the test suite replays this file); here, not in
# campaign.py, so that the command line can name it without importing torch
DEFAULT_SAVE = os.path.join("tests", "fuzz_failures.json")
