"""DcgmReader: a later poll of one exporter reads known series without the Prometheus parser,
and gives what a fresh parse of the same answer gives (sentinels, garbage, labels, caps)."""

from __future__ import annotations

import pytest

import specwatch.sources.metrics.parse as metrics_parse
from specwatch.sources.dcgm.parse import BLANK, DcgmReader, parse_dcgm, to_sample
from specwatch.sources.dcgm.source import DcgmGpuSource
from tests.exposition_cases import sim_dcgm_answers
from tests.sim_fixtures import ManualClock

_LABELS = 'gpu="0", UUID="GPU-x", Hostname="node-a", modelName="Sim"'


def _answer(sm: str, power: str = "300.5", extra: str = "") -> str:
    return (
        "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
        f"DCGM_FI_DEV_SM_CLOCK{{{_LABELS}}} {sm}\n"
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
        f"DCGM_FI_DEV_POWER_USAGE{{{_LABELS}}} {power}\n"
        f"{extra}"
        "# TYPE DCGM_FI_DEV_POWER_VIOLATION counter\n"
        f"DCGM_FI_DEV_POWER_VIOLATION{{{_LABELS}}} 2147483635\n"
        "# TYPE go_goroutines gauge\ngo_goroutines 12\n"
    )


def _no_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str) -> object:
        raise AssertionError(f"the parser was asked for {text[:80]!r}")

    monkeypatch.setattr(metrics_parse, "text_string_to_metric_families", refuse)


def test_a_later_poll_of_the_simulated_exporter_needs_no_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before, after = sim_dcgm_answers(8)
    fresh = parse_dcgm(after)
    reader = DcgmReader()
    reader.parse(before)
    _no_parser(monkeypatch)
    later = reader.parse(after)
    assert later == fresh
    assert len(later.gpus) == 8 and later.error is None
    assert later.gpus[3].hostname == "sim-node"
    assert "DCGM_FI_DEV_LOW_UTIL_VIOLATION" in later.gpus[0].blank  # the simulator's sentinel


def test_a_known_series_turning_blank_is_not_supported(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = DcgmReader()
    first = reader.parse(_answer("1980"))
    assert to_sample(first.gpus[0], 0, 1.0).sm_clock_mhz == 1980
    _no_parser(monkeypatch)
    (gpu,) = reader.parse(_answer("9223372036854775794", power="140737488355328")).gpus
    sample = to_sample(gpu, 0, 2.0)
    assert sample.sm_clock_mhz is None and sample.missing["sm_clock_mhz"] == BLANK
    assert sample.power_w is None and sample.missing["power_w"] == BLANK
    assert sample.power_violation_ns == 2147483635  # a counter near 2^31 is a reading


def test_a_garbage_line_in_a_later_poll_costs_only_itself() -> None:
    reader = DcgmReader()
    reader.parse(_answer("1980"))
    broken = f"DCGM_FI_DEV_POWER_USAGE{{{_LABELS}}} not-a-number\n"
    parsed = reader.parse(_answer("1990", extra=broken))
    assert parsed.error is not None and "1 unparseable" in parsed.error
    sample = to_sample(parsed.gpus[0], 0, 2.0)
    assert (sample.sm_clock_mhz, sample.power_w) == (1990, 300.5)
    healed = reader.parse(_answer("2000", power="310.0"))
    assert healed.error is None
    assert to_sample(healed.gpus[0], 0, 3.0).power_w == 310.0


def test_changed_labels_are_new_series_and_sanitised() -> None:
    reader = DcgmReader()
    reader.parse(_answer("1980"))
    hostile = _answer("1980").replace("node-a", "evil\x1b[2J" + "x" * 500)
    (gpu,) = reader.parse(hostile).gpus
    assert gpu.hostname is not None and "\x1b" not in gpu.hostname and len(gpu.hostname) < 300
    moved = reader.parse(_answer("1980").replace('UUID="GPU-x"', 'UUID="GPU-y"'))
    assert [g.key for g in moved.gpus] == ["GPU-y"]


def test_the_source_keeps_one_reader_per_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {"http://a:9400/metrics": _answer("1500"), "http://b:9400/metrics": _answer("1600")}

    def fetch(url: str, timeout_s: float, max_bytes: int) -> str:
        return answers[url]

    clock = ManualClock(0.0)
    source = DcgmGpuSource(["a", "b"], clock=clock.now, fetch=fetch)
    assert source.open().available
    _no_parser(monkeypatch)
    answers["http://a:9400/metrics"] = _answer("1700", power="250.0")
    clock.advance(1.0)
    tick = source.sample()
    assert tick.error is None
    assert [s.sm_clock_mhz for s in tick.samples] == [1700, 1600]
    assert tick.samples[0].power_w == 250.0


def test_churning_series_and_names_do_not_grow_the_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import specwatch.sources.dcgm.parse as parse

    monkeypatch.setattr(parse, "MAX_SERIES", 10)
    monkeypatch.setattr(metrics_parse, "MAX_SERIES", 10)
    reader = DcgmReader()
    for poll in range(6):
        text = "".join(
            f'DCGM_FI_DEV_SM_CLOCK{{gpu="{i}", UUID="GPU-{poll}-{i}"}} 1500\n'
            f'DCGM_FI_CUSTOM_{poll}_{i}{{gpu="{i}", UUID="GPU-{poll}-{i}"}} 1\n'
            for i in range(4)
        )
        parsed = reader.parse(text)
        assert [g.key for g in parsed.gpus] == [f"GPU-{poll}-{i}" for i in range(4)]
        assert len(reader._series) <= 2 * 10
        assert len(reader._reader._decided) <= 2 * 10
