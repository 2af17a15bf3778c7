"""Out-of-range and mistyped values give one line, never a traceback (issue 28 item 10)."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from specwatch.record.reader import Reader, RecordingError
from tests.record_world import record_story, story

DATA = Path(__file__).parent / "data"


def _specwatch(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specwatch", *argv], capture_output=True, text=True, timeout=60
    )


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    return result.stderr


def test_an_exporter_s_minus_1e308_is_blank_not_an_overflow() -> None:
    from specwatch.sources.dcgm.parse import parse_dcgm, to_sample

    labels = 'gpu="0",UUID="GPU-a",Hostname="n",modelName="L4"'
    body = "".join(
        f"{name}{{{labels}}} {value}\n"
        for name, value in (
            ("DCGM_FI_DEV_SM_CLOCK", "1500"),
            ("DCGM_FI_DEV_FB_TOTAL", "-1e308"),
            ("DCGM_FI_DEV_FB_USED", "1e308"),
            ("DCGM_FI_DEV_POWER_USAGE", "1e300"),
        )
    )
    (gpu,) = parse_dcgm(body).gpus
    sample = to_sample(gpu, 0, 0.0)
    assert sample.sm_clock_mhz == 1500 and sample.mem_total_bytes is None
    assert sample.power_w is None and "mem_used_bytes" in sample.missing


def test_a_snapshot_with_tok_s_1e308_is_refused_in_one_line(tmp_path: Path) -> None:
    text = (DATA / "snapshot-v2.json").read_text()
    big = tmp_path / "big.json"
    big.write_text(re.sub(r'("tok_s": )[0-9.e+-]+', r"\g<1>1e308", text))
    result = _specwatch("compare", str(big), str(DATA / "snapshot-v2.json"))
    assert result.returncode == 2
    assert _one_line(result).strip().endswith("number out of range: 1e+308")


# Its module-scoped fixture is built once: under pytest-xdist the module runs on one worker.
pytestmark = pytest.mark.xdist_group("hostile-values")


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rec") / "base.sqlite"
    record_story(path, iter(list(story(5))))
    return path


def _variant(base: Path, tmp_path: Path, *sql: tuple[str, tuple[object, ...]]) -> Path:
    path = tmp_path / "v.sqlite"
    shutil.copy(base, path)
    with sqlite3.connect(path) as conn:
        for statement, params in sql:
            conn.execute(statement, params)
    return path


def test_a_recording_with_version_superscript_two_is_refused(
    recording: Path, tmp_path: Path
) -> None:
    path = _variant(
        recording, tmp_path, ("UPDATE meta SET value=? WHERE key='format_version'", ("²",))
    )
    with pytest.raises(RecordingError, match="no format version"):
        Reader(path)
    assert "no format version" in _one_line(_specwatch("export", "--csv", str(path)))


@pytest.mark.parametrize("offset", ["inf", "nan", "-inf"])
def test_a_recording_whose_wall_offset_is_not_finite_still_reads(
    recording: Path, tmp_path: Path, offset: str
) -> None:
    sql = ("UPDATE meta SET value=? WHERE key='wall_offset'", (offset,))
    path = _variant(recording, tmp_path, sql)
    with Reader(path) as reader:
        assert reader.offset == 0.0 and reader.label(1.0)
    result = _specwatch("export", "--json", str(path))
    _one_line(result)
    assert result.returncode == 0 and json.loads(result.stdout.splitlines()[0])


def test_text_in_a_recording_s_numeric_columns_skips_the_row(
    recording: Path, tmp_path: Path
) -> None:
    path = _variant(
        recording,
        tmp_path,
        ("UPDATE events SET t='abc', wall='xyz' WHERE id=4", ()),
        ("UPDATE events SET server='abc' WHERE id=5", ()),
        ("UPDATE events SET wall='nope' WHERE id=6", ()),
    )
    with Reader(path) as reader:
        assert reader.span() is not None
        events = list(reader.events())
        assert reader.skipped == 3 and len(events) > 0
    result = _specwatch("export", "--csv", str(path))
    assert result.returncode == 0 and "3 unreadable events skipped" in _one_line(result)


def test_a_host_label_over_63_characters_is_refused_in_one_line() -> None:
    host = "ä" * 64
    for argv in (
        ("probe", f"http://{host}.example:8000"),
        ("probe", "--dcgm", f"http://{host}:9400", "http://127.0.0.1:9"),
        ("probe", "--prometheus", f"http://{host}:9090"),
        ("bench", "--url", f"http://{host}:8000"),
    ):
        result = _specwatch(*argv)
        assert result.returncode == 2, argv
        assert "label longer than 63 characters" in _one_line(result), argv
    from specwatch.sources.http.endpoint import parse_endpoint

    with pytest.raises(ValueError, match="longer than 63"):
        parse_endpoint("a" * 64 + ".example:8000")


def test_two_recorders_on_one_file_are_refused(tmp_path: Path) -> None:
    from specwatch.record import Recorder
    from specwatch.sources.http.endpoint import Endpoint

    path = tmp_path / "one.sqlite"
    first = Recorder(path, [Endpoint("http://a:8000")])
    first.start()
    try:
        second = Recorder(path, [Endpoint("http://b:8000")])
        with pytest.raises(ValueError, match="another specwatch is recording into it"):
            second.start()
        result = _specwatch("record", "--url", "http://b:8000", "--no-gpu", "-o", str(path))
        assert result.returncode == 2
        assert "another specwatch is recording into it" in _one_line(result)
    finally:
        first.stop()
    again = Recorder(path, [Endpoint("http://a:8000")])  # the same server appends, as before
    again.start()
    again.stop()
    other = Recorder(path, [Endpoint("http://b:8000")])
    with pytest.raises(ValueError, match="not of this session's servers"):
        other.start()
    with Reader(path) as reader:
        assert reader.url == "http://a:8000"
