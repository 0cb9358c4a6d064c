"""`python -m chunkproof` is the `chunkproof` command."""
import sys

from chunkproof.cli import main

sys.exit(main())
