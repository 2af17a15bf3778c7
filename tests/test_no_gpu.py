"""``--no-gpu``: the TUI watches the server only and never touches NVML or an exporter."""

from __future__ import annotations

from typing import Any

import pytest

from specwatch.commands.main import build_parser
from specwatch.commands.tui import build_session
from specwatch.session import NoGpus
from specwatch.session.events import GpuInventoryChanged, SessionEvent


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Constructing the NVML sampler fails the test."""

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("NVML must not be used with --no-gpu")

    monkeypatch.setattr("specwatch.sources.nvml.sampler.GpuSampler", refuse)


def test_no_gpu_reads_no_gpus_and_says_why(no_nvml: None) -> None:
    args = build_parser().parse_args(["--url", "http://127.0.0.1:9", "--no-gpu"])
    session = build_session(args)
    assert isinstance(session.gpus, NoGpus)
    seen: list[SessionEvent] = []
    session.gpus.start(seen.append)
    (event,) = seen
    assert isinstance(event, GpuInventoryChanged)
    assert not event.inventory.available
    assert event.inventory.reason == "GPUs not read (--no-gpu)"


def test_no_gpu_with_an_exporter_is_refused(no_nvml: None) -> None:
    args = build_parser().parse_args(
        ["--url", "http://127.0.0.1:9", "--no-gpu", "--dcgm", "127.0.0.1:9400"]
    )
    with pytest.raises(ValueError, match="--no-gpu reads no GPUs"):
        build_session(args)
