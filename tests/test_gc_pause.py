"""``gc_paused``: nested and concurrent pauses leave the collector as they found it."""

from __future__ import annotations

import gc
import threading

from specwatch.core.gc_pause import gc_paused


def test_nested_and_concurrent_pauses_turn_the_collector_back_on_once() -> None:
    assert gc.isenabled()
    inside = threading.Event()
    leave = threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            leave.wait(10)

    worker = threading.Thread(target=other)
    with gc_paused():
        worker.start()
        assert inside.wait(10)
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled()  # the worker's pause still holds
    leave.set()
    worker.join(10)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
