"""Helpers for tests that drive the simulator."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

from specwatch.sim.config import SimConfig
from specwatch.sim.gpus import SimGpus
from specwatch.sim.server import SimServer
from specwatch.sim.world import Clock, SimWorld

T = TypeVar("T")

FAST: dict[str, Any] = {
    "base_step_ms": 1.0,
    "plain_step_ms": 1.0,
    "prefill_ms": 2.0,
    "batch_step_ms": 0.1,
    "warmup_requests": 0,
}
"""Config overrides for quick tests: 1 ms steps, no warmup slowdown."""


@contextmanager
def serving(
    config: SimConfig, clock: Clock | None = None, gpus: SimGpus | None = None
) -> Iterator[tuple[SimWorld, SimServer]]:
    """A world and its server on 127.0.0.1 (any free port), stopped on exit."""
    world = SimWorld(config, clock=clock, gpus=gpus)
    server = SimServer(world)
    server.start()
    try:
        yield world, server
    finally:
        server.stop()


def sse_data(text: str) -> list[Any]:
    """The ``data:`` payloads of a server-sent-events body: JSON decoded, ``"[DONE]"`` kept."""
    out: list[Any] = []
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def in_thread(fn: Callable[[], T]) -> Future[T]:
    """Run a blocking call (an HTTP request) on a daemon thread; its result as a future."""
    fut: Future[T] = Future()

    def run() -> None:
        try:
            fut.set_result(fn())
        except BaseException as exc:  # handed to the waiting test
            fut.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return fut


def metric_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a Prometheus text body as ``(name, labels, value)``."""
    from prometheus_client.parser import text_string_to_metric_families

    out: list[tuple[str, dict[str, str], float]] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.append((s.name, dict(s.labels), float(s.value)))
    return out


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The sum of the samples named ``name`` whose labels include ``labels``; None if absent."""
    found = [
        v
        for n, lab, v in metric_samples(text)
        if n == name and all(lab.get(k) == want for k, want in labels.items())
    ]
    return sum(found) if found else None


def metric_names(text: str) -> set[str]:
    """The sample names present in a Prometheus text body."""
    return {n for n, _, _ in metric_samples(text)}
