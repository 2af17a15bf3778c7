"""Snapshots: schema round trip, atomic never-overwriting writes, refusals, no API key inside."""

from __future__ import annotations

import datetime as dt
import errno
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specwatch.bench import snapshot as snapmod
from specwatch.bench.snapshot import (
    SCHEMA_VERSION,
    SnapshotError,
    build_snapshot,
    read_snapshot,
    snapshot_name,
    validate,
    write_snapshot,
)
from tests.test_compare import STORY_AFTER, synthetic_result

NOW = dt.datetime(2026, 11, 29, 19, 45, 0, tzinfo=dt.timezone.utc)
KEY = "sk-specwatch-test-4f1c9e"


def story_snapshot(**kw: Any) -> dict[str, Any]:
    return build_snapshot(
        synthetic_result(STORY_AFTER, label="old commit bba2fc4", **kw),
        ["specwatch", "bench", "--url", "localhost:8000", "-n", "5"],
        now=NOW,
        host="gpu-box",
    )


def test_round_trip_through_the_schema(tmp_path: Path) -> None:
    snap = story_snapshot()
    path = write_snapshot(snap, tmp_path)
    assert path.parent == tmp_path
    assert path.name == "specwatch-20261129T194500Z-old-commit-bba2fc4.json"
    back = read_snapshot(path)
    assert back == orjson.loads(orjson.dumps(snap))
    assert back["schema_version"] == SCHEMA_VERSION == 5
    assert back["tool"]["name"] == "specwatch"
    assert back["created"] == "2026-11-29T19:45:00Z"
    assert back["host"] == "gpu-box"
    assert back["server"]["speculative"]["algorithm"] == "EAGLE3"
    assert back["gpu_environment"]["driver_version"] == "580.65.06"
    assert [r["tok_s"] for r in back["runs"]] == STORY_AFTER
    assert back["overall"]["tok_s"]["mean"] == pytest.approx(82.8)
    assert back["overall"]["gpus"][0]["sm_clock_mean_mhz"] == 1980.0
    assert back["interrupted"] is False and back["complete"] is True
    assert not list(tmp_path.glob(".specwatch-*"))  # no temp file left behind


def test_never_overwrites(tmp_path: Path) -> None:
    snap = story_snapshot()
    first = write_snapshot(snap, tmp_path)
    first_bytes = first.read_bytes()
    second = write_snapshot({**snap, "host": "other"}, tmp_path)
    third = write_snapshot(snap, tmp_path)
    assert len({first, second, third}) == 3
    assert second.name.endswith("-2.json") and third.name.endswith("-3.json")
    assert first.read_bytes() == first_bytes
    assert read_snapshot(second)["host"] == "other"


def test_creates_the_directory(tmp_path: Path) -> None:
    path = write_snapshot(story_snapshot(), tmp_path / "a" / "b")
    assert path.exists()


def test_snapshot_is_readable_by_others(tmp_path: Path) -> None:
    path = write_snapshot(build_snapshot(synthetic_result([80.0, 81.0])), tmp_path)
    assert path.stat().st_mode & 0o777 == 0o644


def test_names() -> None:
    assert snapshot_name("2026-11-29T19:45:00Z", None) == "specwatch-20261129T194500Z.json"
    assert snapshot_name("2026-11-29T19:45:00Z", "../../etc/x y") == (
        "specwatch-20261129T194500Z-etc-x-y.json"
    )


def _raise(code: int) -> Any:
    def fail(*_a: Any, **_k: Any) -> Any:
        raise OSError(code, os.strerror(code))

    return fail


def test_read_only_directory_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "ro"
    target.mkdir()
    target.chmod(0o555)
    if os.geteuid() == 0:
        # root ignores permission bits: make the file system say what a read-only mount says.
        monkeypatch.setattr(tempfile, "mkstemp", _raise(errno.EROFS))
    with pytest.raises(SnapshotError) as e:
        write_snapshot(story_snapshot(), target)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(f"cannot write snapshot to {target}: ")
    assert message.endswith(("read-only file system", "permission denied"))
    assert list(target.iterdir()) == []


def test_full_disk_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapmod, "_write_all", _raise(errno.ENOSPC))
    with pytest.raises(SnapshotError, match=r"no space left on device$"):
        write_snapshot(story_snapshot(), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_malformed_files_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"schema_version": 1, "runs": [')
    with pytest.raises(SnapshotError, match=r"bad.json: not valid JSON"):
        read_snapshot(bad)
    other = tmp_path / "other.json"
    other.write_bytes(b'{"hello": "world"}')
    with pytest.raises(SnapshotError, match=r"not a valid specwatch snapshot: .*required"):
        read_snapshot(other)
    listy = tmp_path / "list.json"
    listy.write_bytes(b"[1, 2]")
    with pytest.raises(SnapshotError, match="top level is not an object"):
        read_snapshot(listy)
    with pytest.raises(SnapshotError, match=r"cannot read snapshot .*missing\.json"):
        read_snapshot(tmp_path / "missing.json")


def test_wrong_types_deep_inside_are_refused(tmp_path: Path) -> None:
    snap = orjson.loads(orjson.dumps(story_snapshot()))
    snap["runs"][2]["tok_s"] = "fast"
    path = tmp_path / "typed.json"
    path.write_bytes(orjson.dumps(snap))
    with pytest.raises(SnapshotError) as e:
        read_snapshot(path)
    assert "(at runs/2/tok_s)" in str(e.value)
    assert "\n" not in str(e.value)


def test_newer_schema_is_refused_with_advice() -> None:
    snap = {**story_snapshot(), "schema_version": 99}
    with pytest.raises(SnapshotError, match="newer than this specwatch"):
        validate(snap, "future.json")


def test_oversized_file_is_refused_before_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(33 * 1024 * 1024)  # sparse: no 33 MB actually written
    with pytest.raises(
        SnapshotError, match=r"big.json: 33.0 MiB is larger than the 32.0 MiB a snapshot can be"
    ):
        read_snapshot(big)
    small_limit = tmp_path / "ok.json"
    small_limit.write_bytes(orjson.dumps(story_snapshot()))
    with pytest.raises(SnapshotError, match="larger than"):
        read_snapshot(small_limit, max_bytes=100)


def test_api_key_never_lands_in_the_file(tmp_path: Path) -> None:
    argv = ["specwatch", "bench", "--url", "http://h:8000", "--api-key", KEY, "-n", "2"]
    result = synthetic_result(
        STORY_AFTER, launch_args={"tp_size": 8, "api_key": KEY, "hf_token": "hf_abc", "note": KEY}
    )
    snap = build_snapshot(result, [*argv, f"--api-key={KEY}"], secrets=[KEY], now=NOW)
    path = write_snapshot(snap, tmp_path)
    raw = path.read_bytes()
    assert KEY.encode() not in raw
    assert b"hf_abc" not in raw
    back = read_snapshot(path)
    # The one secret rule (core.redaction): the option stays, its value is withheld.
    assert back["command"] == [
        *["specwatch", "bench", "--url", "http://h:8000", "--api-key", "***", "-n", "2"],
        "--api-key=***",
    ]
    assert back["server"]["launch_args"]["api_key"] == "***"
    assert back["server"]["launch_args"]["tp_size"] == 8
    # Keys that merely contain "token" are data, not secrets.
    assert back["overall"]["gpus"][0]["joules_per_token"] is not None
    assert back["config"]["max_tokens"] == 2048


def test_the_key_is_withheld_wherever_it_appears() -> None:
    result = synthetic_result(STORY_AFTER, launch_args={f"k-{KEY}": f"at http://h/{KEY}?x"})
    snap = build_snapshot(result, ["--header", f"Authorization: {KEY}"], secrets=[KEY], now=NOW)
    assert KEY not in str(snap)
    assert snap["server"]["launch_args"] == {"k-***": "at http://h/***?x"}
    assert snap["command"] == ["--header", "Authorization: ***"]


def test_credentials_in_the_url_are_dropped() -> None:
    import dataclasses

    result = synthetic_result(STORY_AFTER)
    result = dataclasses.replace(
        result, server=dataclasses.replace(result.server, base_url="http://user:pw@h:1")
    )
    assert build_snapshot(result)["server"]["base_url"] == "http://h:1"


def test_interrupted_partial_snapshot_is_valid(tmp_path: Path) -> None:
    snap = build_snapshot(synthetic_result(STORY_AFTER[:2], interrupted=True), now=NOW)
    back = read_snapshot(write_snapshot(snap, tmp_path))
    assert back["interrupted"] is True and back["complete"] is False
    assert len(back["runs"]) == 2


_STORY_BYTES = orjson.dumps(story_snapshot())


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=0, max_value=len(_STORY_BYTES) - 1), junk=st.binary(max_size=40))
def test_truncated_or_corrupted_files_are_refused_cleanly(cut: int, junk: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.json"
        # A NUL byte never belongs in JSON: the corrupted forms can never be valid by chance.
        for data in (_STORY_BYTES[:cut], _STORY_BYTES[:cut] + b"\x00" + junk, b"\x00" + junk):
            path.write_bytes(data)
            with pytest.raises(SnapshotError) as e:
                read_snapshot(path)
            assert "\n" not in str(e.value) and str(e.value).startswith(str(path))
