"""Property-based fuzzing of the generated kernels against the fp64 recurrence
(`chunkproof fuzz`): inputs drawn from a seed (cases.py), the oracle
(reference.py), the properties (properties.py) and the campaign (campaign.py)."""
