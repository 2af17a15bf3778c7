"""Reading snapshots: every schema version, typed objects, bounded in size and time."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import orjson
import pytest

from specwatch.bench.snapshot import (
    SCHEMA_VERSION,
    SnapshotError,
    build_snapshot,
    load_snapshot,
    read_snapshot,
    validate,
    write_snapshot,
)
from specwatch.core.compare import compare
from specwatch.core.snapshot_records import Snapshot
from tests.test_compare import STORY_AFTER, synthetic_result

V1 = Path(__file__).parent / "data" / "snapshot-v1.json"
V2 = Path(__file__).parent / "data" / "snapshot-v2.json"


def test_a_version_1_snapshot_still_reads() -> None:
    raw = orjson.loads(V1.read_bytes())
    assert raw["schema_version"] == 1
    assert "sm_clock_max_mhz" in raw["overall"]["gpus"][0]
    snap = load_snapshot(V1)
    assert snap.schema_version == 1
    assert snap.finished_runs == 3
    assert [g.board_max_sm_clock_mhz for g in snap.overall_gpus] == [1980, 1980]
    assert snap.runs[0].gpus[1].sm_clock_mean_mhz == 1830.0
    assert snap.label == "v1 fixture"


def test_a_version_2_snapshot_still_reads_without_identity_or_recorded_load() -> None:
    raw = orjson.loads(V2.read_bytes())
    assert raw["schema_version"] == 2
    assert "process" not in raw["server"] and "load" not in raw["runs"][0]
    snap = load_snapshot(V2)
    assert snap.schema_version == 2
    assert snap.label == "v2 fixture"
    assert snap.finished_runs == 5
    assert snap.server.process is None
    assert snap.server.process_note == "not recorded (snapshot schema version < 3)"
    # Its counters hold no prompt tokens or request latencies: the load is unknown, not zero.
    assert snap.overall.prompt_tok_s.mean is None
    assert snap.overall.running_requests.mean is None
    assert [g.board_max_sm_clock_mhz for g in snap.overall_gpus] == [1980, 1980]


def test_every_version_compares_against_the_newest(tmp_path: Path) -> None:
    new = load_snapshot(write_snapshot(build_snapshot(synthetic_result(STORY_AFTER)), tmp_path))
    for old in (V1, V2):
        c = compare(load_snapshot(old), new)
        assert c.code is None and c.code_summary is None
        assert any("code identity not recorded" in n for n in c.notes)


def test_new_snapshots_name_the_board_maximum_and_bump_the_version(tmp_path: Path) -> None:
    path = write_snapshot(build_snapshot(synthetic_result(STORY_AFTER)), tmp_path)
    raw = read_snapshot(path)
    assert raw["schema_version"] == SCHEMA_VERSION == 5
    gpu = raw["overall"]["gpus"][0]
    assert gpu["board_max_sm_clock_mhz"] == 1980 and "sm_clock_max_mhz" not in gpu
    assert load_snapshot(path).overall_gpus[0].board_max_sm_clock_mhz == 1980


def test_old_and_new_versions_compare(tmp_path: Path) -> None:
    new = load_snapshot(write_snapshot(build_snapshot(synthetic_result(STORY_AFTER)), tmp_path))
    c = compare(load_snapshot(V1), new)
    assert c.attribution.clock_a_mhz == pytest.approx(1830.0)
    assert c.attribution.straggler_a == 1


def test_typed_snapshot_is_frozen() -> None:
    snap = load_snapshot(V1)
    assert isinstance(snap, Snapshot)
    with pytest.raises(AttributeError):
        snap.label = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        snap.config["runs"] = 9  # type: ignore[index]


def _feed(fd: int, data: bytes, chunk: int = 1000) -> threading.Thread:
    def write() -> None:
        try:
            for i in range(0, len(data), chunk):
                os.write(fd, data[i : i + chunk])
        except BrokenPipeError:
            pass  # the reader stopped at its size limit and closed its end, as it should
        finally:
            os.close(fd)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def test_a_pipe_reads_like_process_substitution() -> None:
    r, w = os.pipe()
    writer = _feed(w, V1.read_bytes())
    try:
        snap = load_snapshot(f"/dev/fd/{r}", timeout_s=30)
    finally:
        os.close(r)
    writer.join(5)
    assert snap.finished_runs == 3


def test_a_fifo_with_a_writer_reads(tmp_path: Path) -> None:
    fifo = tmp_path / "a.json"
    os.mkfifo(fifo)

    def write() -> None:
        # Opening for writing blocks until the reader has opened its end.
        with fifo.open("wb") as f:
            f.write(V1.read_bytes())

    t = threading.Thread(target=write, daemon=True)
    t.start()
    assert load_snapshot(fifo, timeout_s=30).finished_runs == 3
    t.join(5)
    assert not t.is_alive()


def test_a_fifo_nobody_writes_to_times_out(tmp_path: Path) -> None:
    fifo = tmp_path / "never.json"
    os.mkfifo(fifo)
    with pytest.raises(SnapshotError) as e:
        read_snapshot(fifo, timeout_s=0.2)
    message = str(e.value)
    assert "\n" not in message
    assert "not complete after 0.2 s (nothing arrived)" in message


def test_a_stalled_pipe_times_out_with_what_it_got() -> None:
    r, w = os.pipe()
    os.write(w, b'{"schema_version": 2, ')
    try:
        with pytest.raises(SnapshotError, match=r"not complete after 0.2 s \(22 bytes so far\)"):
            read_snapshot(f"/dev/fd/{r}", timeout_s=0.2)
    finally:
        os.close(r)
        os.close(w)


def test_size_is_bounded_for_files_and_pipes(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="larger than the 1000 bytes"):
        read_snapshot(V1, max_bytes=1000)
    r, w = os.pipe()
    writer = _feed(w, b" " * 5000)
    try:
        with pytest.raises(SnapshotError, match="larger than the 1000 bytes"):
            read_snapshot(f"/dev/fd/{r}", max_bytes=1000, timeout_s=30)
    finally:
        os.close(r)
    writer.join(5)


def test_a_directory_and_an_empty_file_are_one_line_each(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match=r"it is a directory$"):
        read_snapshot(tmp_path)
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    with pytest.raises(SnapshotError, match=r"not valid JSON \(the file is empty\)$"):
        read_snapshot(empty)


def test_a_version_3_snapshot_must_say_whether_it_knows_the_process() -> None:
    d = build_snapshot(synthetic_result(STORY_AFTER))
    assert d["schema_version"] == 5
    assert d["server"]["process"] is None and d["server"]["process_note"] == "not collected"
    del d["server"]["process"]
    with pytest.raises(SnapshotError, match="'process' is a required property"):
        validate(d)
    d["schema_version"] = 2
    validate(d)  # version 2 never had it
