"""``core.heap``: a tidy frees the cycles made since the last one; a settle freezes what lives."""

from __future__ import annotations

import gc
import platform
import weakref
from collections.abc import Iterator

import pytest

from specwatch.core import heap


class _Node:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def collector_off() -> Iterator[None]:
    """Only explicit collections run (so the test sees which call freed what)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was:
            gc.enable()


@pytest.mark.usefixtures("collector_off")
def test_tidy_frees_a_reference_cycle() -> None:
    node = _Node()
    ref = weakref.ref(node)
    del node
    assert ref() is not None  # a cycle: reference counting alone keeps it
    heap.tidy()
    assert ref() is None


@pytest.mark.usefixtures("collector_off")
def test_settle_freezes_the_living_and_collection_then_skips_them() -> None:
    kept = _Node()
    heap.settle()
    assert gc.get_freeze_count() > 0
    assert gc.get_referrers(kept) == []  # frozen objects are outside the collector's view
    young = _Node()
    ref = weakref.ref(young)
    del young
    heap.tidy()
    assert ref() is None


def test_release_uses_malloc_trim_on_glibc() -> None:
    found = heap._malloc_trim()
    if platform.libc_ver()[0] == "glibc":
        assert found is not None
    heap.release()  # and never raises, with or without it
