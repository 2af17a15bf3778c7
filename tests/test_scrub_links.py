"""``specwatch scrub`` on links (issue 42 item 3): a symbolic link or a hard-linked file is refused
in one line naming the real path, and "secrets withheld" is said only when the bytes changed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

SECRET = "s3cr3t-db-pass-0001"
STORY = Path(__file__).parent / "data" / "snapshot-v2.json"


def _old_snapshot(path: Path) -> bytes:
    """A snapshot as an older specwatch wrote it: a secret-named launch option in the clear."""
    doc = orjson.loads(STORY.read_bytes())
    doc["server"]["launch_args"] = {"tp_size": 8, "db_password": SECRET}
    data = orjson.dumps(doc)
    path.write_bytes(data)
    return data


def _scrub(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specwatch", "scrub", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_symlink_is_refused_naming_the_real_file_which_is_left_alone(tmp_path: Path) -> None:
    real = tmp_path / "real" / "old.json"
    real.parent.mkdir()
    data = _old_snapshot(real)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    result = _scrub(link)
    assert result.returncode == 2 and "withheld" not in result.stdout
    line = _one_line(result)
    assert f"a symbolic link to {real.resolve()}" in line and f"scrub {real.resolve()}" in line
    assert link.is_symlink() and real.read_bytes() == data


def test_a_hard_linked_file_is_refused_and_every_name_left_alone(tmp_path: Path) -> None:
    first = tmp_path / "a.json"
    data = _old_snapshot(first)
    second = tmp_path / "b.json"
    os.link(first, second)
    for name in (first, second):
        result = _scrub(name)
        assert result.returncode == 2 and "withheld" not in result.stdout
        assert "has 2 hard links" in _one_line(result)
    assert first.read_bytes() == data == second.read_bytes()
    assert first.stat().st_nlink == 2 and first.stat().st_ino == second.stat().st_ino


def test_a_plain_file_is_scrubbed_keeping_owner_group_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    _old_snapshot(path)
    path.chmod(0o640)
    before = path.stat()
    result = _scrub(path)
    assert result.returncode == 0 and result.stdout.strip() == f"{path}: secrets withheld"
    after = path.stat()
    assert SECRET.encode() not in path.read_bytes()
    assert stat.S_IMODE(after.st_mode) == 0o640 and after.st_nlink == 1
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    scrubbed = path.read_bytes()
    again = _scrub(path)
    assert again.stdout.strip() == f"{path}: nothing to withhold"
    assert path.read_bytes() == scrubbed


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root")
def test_a_file_of_another_owner_keeps_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "theirs.json"
    _old_snapshot(path)
    os.chown(path, 4242, 4343)
    assert _scrub(path).returncode == 0
    assert (path.stat().st_uid, path.stat().st_gid) == (4242, 4343)
    assert SECRET.encode() not in path.read_bytes()
