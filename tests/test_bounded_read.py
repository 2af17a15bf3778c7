"""``read_bounded`` on a regular file: read whole, refused past its limit, sized by the file."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from specwatch.bench.bounded_read import BoundedReadError, read_bounded


def test_a_file_under_the_limit_is_read_whole_with_memory_for_its_size(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.json"
    path.write_bytes(b"{}" * 20_000)
    tracemalloc.start()
    try:
        data = read_bounded(path, 32 * 1024 * 1024, 1.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data == b"{}" * 20_000
    assert peak < 1024 * 1024  # read(limit + 1) allocated the whole 32 MiB first


def test_a_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"x" * 101)
    with pytest.raises(BoundedReadError, match="larger than") as info:
        read_bounded(path, 100, 1.0, what="a snapshot")
    assert info.value.too_large
