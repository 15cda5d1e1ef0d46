import pytest

import ledgercache as lc


@pytest.fixture
def clock() -> lc.ManualClock:
    return lc.ManualClock()


def make_manager(clock: lc.ManualClock | None = None, **settings) -> lc.EntryCacheManager:
    return lc.EntryCacheManager(lc.CacheConfig(**settings), clock=clock)
