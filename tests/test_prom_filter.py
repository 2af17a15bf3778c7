"""Reading only the used ``/metrics`` families gives what the full parse gives."""

from __future__ import annotations

from typing import Any

import pytest

from specwatch.core.server import Dialect, ServerInfo, SpecConfig
from specwatch.sim.presets import preset
from specwatch.sources.dialects.base import WindowBuilder, all_dialects, dialect_for
from specwatch.sources.metrics.parse import MetricsReader, parse_metrics
from specwatch.sources.metrics.prom import Scrape
from tests.exposition_cases import EXPOSITION_CASES, big_vllm_exposition, sim_exposition

Window = tuple[dict[str, Any], dict[str, str], dict[str, str]]


def _info(dialect: str, version: str, overrides: dict[str, Any]) -> ServerInfo:
    cfg = preset(dialect, version, **overrides)
    spec = SpecConfig(
        enabled=cfg.spec_enabled,
        num_steps=cfg.num_steps if cfg.spec_enabled else None,
        num_draft_tokens=cfg.num_draft_tokens if cfg.spec_enabled else None,
    )
    return ServerInfo(base_url="http://sim", dialect=cfg.dialect, version=version, spec=spec)


def _window(info: ServerInfo, cur: Scrape, prev: Scrape | None, dt: float) -> Window:
    b = WindowBuilder()
    dialect = dialect_for(info.dialect)
    b.notes.update(dialect.scrape_notes(cur))
    dialect.derive_window(b, cur, prev, dt, info)
    return b.values, b.sources, b.notes


def _kept(scrape: Scrape, wanted: tuple[str, ...]) -> list[Any]:
    return [s for s in scrape.samples if s.name.startswith(wanted)]


@pytest.mark.parametrize(
    ("dialect", "version", "overrides"),
    EXPOSITION_CASES,
    ids=[f"{d}-{v}-{'-'.join(map(str, o.values())) or 'default'}" for d, v, o in EXPOSITION_CASES],
)
def test_filtered_windows_equal_full_windows(
    dialect: str, version: str, overrides: dict[str, Any]
) -> None:
    info = _info(dialect, version, overrides)
    wanted = dialect_for(info.dialect).wanted_families
    first = sim_exposition(dialect, version, 20.0, **overrides)
    second = sim_exposition(dialect, version, 25.0, **overrides)
    full_first, full_second = parse_metrics(first), parse_metrics(second)
    if not wanted:
        assert info.dialect is Dialect.OPENAI  # keeps everything: nothing to compare
        return
    reader = MetricsReader(wanted)
    got_first, got_second = reader.parse(first), reader.parse(second)  # the second from memory
    assert got_first.error is None and got_second.error is None
    assert list(got_first.samples) == _kept(full_first, wanted)
    assert list(got_second.samples) == _kept(full_second, wanted)
    unread = [s for s in full_second.samples if not s.name.startswith(wanted)]
    assert len(got_second.samples) == len(full_second.samples) - len(unread)
    for family, kind in got_second.types.items():
        assert full_second.types[family] == kind
    assert _window(info, got_first, None, 0.0) == _window(info, full_first, None, 0.0)
    filtered = _window(info, got_second, got_first, 5.0)
    assert filtered == _window(info, full_second, full_first, 5.0)
    assert filtered[0], "the window should have values"


def test_every_metrics_dialect_names_its_families() -> None:
    for dialect in all_dialects():
        if dialect.dialect is not Dialect.OPENAI:
            assert dialect.wanted_families, dialect.dialect


def test_load_pane_families_are_kept() -> None:
    wanted = dialect_for(Dialect.VLLM).wanted_families
    scrape = MetricsReader(wanted).parse(big_vllm_exposition(engines=3))
    for name in (
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_prompt_tokens",
    ):
        hist = scrape.histogram(name)
        assert hist is not None and hist.count > 0, name
    assert scrape.total("vllm:kv_cache_usage_perc") is not None
    assert scrape.total("vllm:prompt_tokens_total") is not None
    # A family no pane reads is still skipped unparsed.
    assert not scrape.has("vllm:request_inference_time_seconds_count")


GROUP = (
    "# HELP vllm:x_total X\n# TYPE vllm:x_total counter\n"
    'vllm:x_total{engine="0"} 5.0\nvllm:x_total{engine="1"} 7.0\n'
    "# TYPE other_seconds histogram\n"
    'other_seconds_bucket{le="+Inf"} 3\nother_seconds_count 3\nother_seconds_sum 1.5\n'
)


def test_bad_lines_are_reported_and_cost_only_themselves() -> None:
    reader = MetricsReader(["vllm:x"])
    assert reader.parse(GROUP).total("vllm:x_total") == 12.0
    bad_value = GROUP.replace('{engine="1"} 7.0', '{engine="1"} seven')
    scrape = reader.parse(bad_value)
    assert scrape.error is not None and "1 unparseable line" in scrape.error
    assert scrape.total("vllm:x_total") == 5.0
    garbage = GROUP + 'this is not prometheus text\nbroken{a="1\n'
    scrape = reader.parse(garbage)
    assert scrape.error is not None and "2 unparseable line" in scrape.error
    assert scrape.total("vllm:x_total") == 12.0


def test_an_unused_group_with_a_stray_line_is_read_line_by_line() -> None:
    text = GROUP.replace(
        "other_seconds_sum 1.5\n", 'other_seconds_sum 1.5\nvllm:x_total{engine="2"} 1\n'
    )
    assert MetricsReader(["vllm:x"]).parse(text).total("vllm:x_total") == 13.0


def test_values_with_underscores_and_timestamps_follow_the_parser() -> None:
    reader = MetricsReader(["vllm:x"])
    reader.parse(GROUP)
    scrape = reader.parse(GROUP.replace("5.0", "1_000"))
    assert scrape.error is not None  # prometheus_client refuses 1_000; float() would not
    stamped = reader.parse(GROUP.replace("5.0", "5.0 1700000000000"))
    assert stamped.error is None and stamped.total("vllm:x_total") == 12.0


def test_remembered_series_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import specwatch.sources.metrics.parse as metrics_parse

    monkeypatch.setattr(metrics_parse, "MAX_SERIES", 1)
    reader = MetricsReader(["vllm:x"])
    for _ in range(3):
        assert reader.parse(GROUP).total("vllm:x_total") == 12.0
        assert len(reader._series) <= 2


def test_remembered_names_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import specwatch.sources.metrics.parse as metrics_parse

    monkeypatch.setattr(metrics_parse, "MAX_SERIES", 10)
    reader = MetricsReader(["vllm:x"])
    for poll in range(6):
        churn = "".join(f"other_{poll}_{i} 1\n" for i in range(8))  # new names every scrape
        assert reader.parse(GROUP + churn).total("vllm:x_total") == 12.0
        assert len(reader._decided) <= 2 * 10


def _values(scrape: Scrape) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, dict(s.labels), s.value) for s in scrape.samples]


def test_later_scrapes_read_changed_lines_as_the_parser_does() -> None:
    head = "# TYPE a_total counter\n"
    first = head + 'a_total{e="0"} 1\na_total{e="1"} 2\n'
    later = (
        head + 'a_total{e="0"} 1\na_total{e="1"} 5\n',  # one value moved
        head + 'a_total{e="0"} 1\na_total{e="2"} 7\n',  # a series replaced, same line count
        head + 'a_total{e="0"} 1\na_total{e="1"} 9 1700000000000\n',  # a timestamp appears
        head + 'a_total{e="0"} 1\na_total{e="1"} 1_0\n',  # what the parser refuses
        head + 'a_total{e="0"} 3\na_total{e="1"} 4\n',
    )
    reader = MetricsReader(("a_",))
    reader.parse(first)
    for text in later:
        got, full = reader.parse(text), parse_metrics(text)
        assert _values(got) == _values(full)
        assert (got.error is None) == (full.error is None)


def _same(got: Scrape, fresh: Scrape) -> None:
    assert repr(_values(got)) == repr(_values(fresh))  # nan == nan
    assert [s.key for s in got.samples] == [s.key for s in fresh.samples]
    assert dict(got.types) == dict(fresh.types)
    assert got.error == fresh.error


DIFFED = (
    GROUP.replace("7.0", "8.0"),  # a kept value moves: read from the changed line alone
    GROUP.replace("7.0", "8.0").replace("sum 1.5", "sum 2.5"),  # and one of a skipped group
    GROUP.replace("7.0", "8.0").replace("other_seconds_sum 1.5", "stray_sum 1.5"),  # not its own
    GROUP.replace("X\n", "Y\n"),  # a comment changes
    GROUP.replace("# TYPE vllm:x_total counter", "# TYPE vllm:x_total gauge"),
    GROUP.replace('{engine="1"} 7.0', '{engine="1"} seven'),  # a bad line appears ...
    GROUP.replace('{engine="1"} 7.0', '{engine="1"} seven').replace("5.0", "6.0"),  # ... stays
    GROUP.replace('{engine="1"} 7.0', '{engine="1"} 9.0'),  # and goes
    GROUP.replace('{engine="1"} 7.0', '{engine="2"} 9.0'),  # a series replaced
    GROUP.replace("5.0", "5.0 1700000000000"),  # a timestamp
    GROUP.replace("5.0", "1_0"),  # what the parser refuses
    GROUP.replace("5.0", "nan"),
    GROUP.rstrip("\n"),  # no final newline
    GROUP + "\n",  # a blank last line
    GROUP.replace("5.0", "6.0"),
)


def test_a_body_that_differs_only_in_values_reads_as_a_fresh_reader_reads_it() -> None:
    reader = MetricsReader(["vllm:x"])
    reader.parse(GROUP)
    for text in DIFFED:
        got = reader.parse(text)
        fresh = MetricsReader(["vllm:x"])
        _same(got, fresh.parse(text))
        _same(got, fresh.parse(text))  # a fresh reader's second reading, from its memory
        again = reader.parse(text)
        _same(again, got)
        # an unchanged body keeps every sample object: the restart check relies on it
        assert all(a is b for a, b in zip(got.samples, again.samples, strict=True))


def test_only_changed_lines_are_read_on_a_diffable_body(monkeypatch: pytest.MonkeyPatch) -> None:
    import specwatch.sources.metrics.parse as metrics_parse

    reader = MetricsReader(["vllm:x"])
    reader.parse(GROUP)  # new series are read line by line ...
    reader.parse(GROUP.replace("5.0", "4.0"))  # ... and known ones by the group
    first = reader.parse(GROUP)

    def refuse(*args: object) -> None:
        raise AssertionError("read afresh")

    monkeypatch.setattr(reader, "_read", refuse)
    got = reader.parse(GROUP.replace("7.0", "8.0").replace("sum 1.5", "sum 2.5"))
    assert got.total("vllm:x_total") == 13.0
    assert got.samples[0] is first.samples[0] and got.samples[1] is not first.samples[1]
    assert reader._last is not None
    assert metrics_parse._diff(GROUP.replace("X\n", "Y\n").split("\n"), reader._last) is None
