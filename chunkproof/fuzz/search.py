"""One Hypothesis search per (property, variant, device, dtype): replay that cell's
database entries, generate up to max_examples examples, shrink the first failure.

Why not hypothesis.find: it takes a seeded Random through @seed, and @seed (like
settings.derandomize) turns the database off; a campaign needs both a reproducible
`--seed` and its failures saved.  So the @given test here is find's, with the seed set
the way @seed sets it minus the database=None (two attributes Hypothesis's own find
sets: the database key and the seed)."""
from __future__ import annotations

import unittest

from hypothesis import HealthCheck, Phase, Verbosity, given, settings as Settings
from hypothesis.database import ExampleDatabase

STRATEGY_VERSION = 1      # bump when a strategy change would reinterpret saved choices
REPLAY_PHASES = (Phase.reuse,)
# no explain phase: it reruns the shrunk example dozens of times, each a kernel run
CAMPAIGN_PHASES = (Phase.reuse, Phase.generate, Phase.shrink)


def database_key(variant, prop, device, dtype) -> bytes:
    """The key of a cell's entries in the example database: the campaign and the tests
    use this one function, so the tests replay exactly what a campaign saved."""
    return f"chunkproof-fuzz/v{STRATEGY_VERSION}/{variant}/{prop}/{device}/{dtype}".encode()


class OneKey(ExampleDatabase):
    """`db` seen through one key: the cell's shrunk failures.  Hypothesis also keeps,
    under other keys, the examples it passed through while shrinking (and moves there an
    entry that no longer fails): in a committed directory those are dozens of files that
    every replay would run.  Here they are dropped, so a fixed bug's entry is deleted."""

    def __init__(self, db, key):
        super().__init__()
        self.db, self.key = db, key

    def fetch(self, key):
        return self.db.fetch(key) if key == self.key else iter(())

    def save(self, key, value):
        if key == self.key:
            self.db.save(key, value)

    def delete(self, key, value):
        if key == self.key:
            self.db.delete(key, value)

    def _start_listening(self):
        pass

    def _stop_listening(self):
        pass


class _Found(Exception):
    pass


def search(strategy, condition, *, key, database, max_examples, seed, phases=CAMPAIGN_PHASES) -> bool:
    """Run `condition` on examples of `strategy` until it returns True (then shrink
    while it stays True).  True when an example satisfied it; the caller keeps the
    examples themselves (the last one satisfying it is the shrunk one)."""
    database = None if database is None else OneKey(database, key)
    # derandomize explicit: a profile that sets it would turn the database off
    settings = Settings(max_examples=max_examples, database=database, deadline=None, phases=phases, derandomize=False,
                        verbosity=Verbosity.quiet, report_multiple_bugs=False,
                        suppress_health_check=list(HealthCheck))

    @settings
    @given(strategy)
    def test(ex):
        if condition(ex):
            raise _Found

    test._hypothesis_internal_use_seed = seed
    test._hypothesis_internal_database_key = key
    try:
        test()
    except _Found:
        return True
    except unittest.SkipTest:     # nothing to run: replay only, and no entries under this key
        return False
    return False
