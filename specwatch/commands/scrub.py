"""``specwatch scrub FILE...``: rewrite snapshots written before the secret rule, in place.

Only a regular file with one name is rewritten, atomically and keeping its owner, group and
mode. A symbolic link or a file with several hard links is refused in one line naming the real
path: replacing the name would leave the secret under the file's other names (or behind the
link). "secrets withheld" is said only once the bytes on disk are read back scrubbed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from specwatch.bench.snapshot import (
    MAX_SNAPSHOT_BYTES,
    SnapshotError,
    dumps,
    os_reason,
    parse_snapshot,
    scrub_snapshot,
)
from specwatch.commands.arguments import say_error


def add_scrub_arguments(p: argparse.ArgumentParser) -> None:
    """The ``scrub`` subcommand's arguments."""
    p.add_argument("files", nargs="+", metavar="FILE", help="snapshots to rewrite in place")


def scrub_file(path: Path) -> bool:
    """Rewrite one snapshot with every secret withheld; ``True`` when the file on disk now
    holds fewer secrets than it did.

    Raises:
        SnapshotError: A link, not a readable snapshot, or it cannot be replaced as it was
            (owner, group, mode).
    """
    try:
        before = _one_name(path)
        data = _read(path, before)
    except OSError as e:
        raise SnapshotError(f"cannot read snapshot {path}: {os_reason(e)}") from None
    raw = parse_snapshot(data, str(path))
    scrubbed = scrub_snapshot(raw)
    if scrubbed == raw:
        return False
    new = dumps(scrubbed)
    try:
        _replace(path, before, new)
        written = _read(path, _one_name(path))
    except OSError as e:
        raise SnapshotError(f"cannot rewrite {path}: {os_reason(e)}") from None
    if written != new:
        raise SnapshotError(f"{path}: rewritten, but it does not read back scrubbed: check it")
    return True


def _one_name(path: Path) -> os.stat_result:
    """``path``'s own status (not a link's target).

    Raises:
        SnapshotError: A symbolic link, not a regular file, or one with other names.
        OSError: It cannot be looked at.
    """
    st = os.lstat(path)
    real = os.path.realpath(path)
    if stat.S_ISLNK(st.st_mode):
        raise SnapshotError(
            f"{path}: a symbolic link to {real}, not followed (the link would be replaced, the "
            f"file left as it is): scrub {real}"
        )
    if not stat.S_ISREG(st.st_mode):
        raise SnapshotError(f"{path}: not a regular file")
    if st.st_nlink > 1:
        raise SnapshotError(
            f"{path}: {real} has {st.st_nlink} hard links, and the others would keep the "
            "secret: remove them first, or scrub a copy"
        )
    return st


def _read(path: Path, st: os.stat_result) -> bytes:
    """The bytes of ``path``, which must still be the file ``st`` describes.

    Raises:
        SnapshotError: It changed, or is larger than a snapshot can be.
        OSError: It cannot be read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        now = os.fstat(fh.fileno())
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise SnapshotError(f"{path}: replaced while it was read: run scrub again")
        data = fh.read(MAX_SNAPSHOT_BYTES + 1)
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(f"{path}: larger than {MAX_SNAPSHOT_BYTES // 2**20} MiB")
    return data


def _replace(path: Path, st: os.stat_result, data: bytes) -> None:
    """Put ``data`` in ``path``'s place atomically, with its owner, group and mode.

    Raises:
        SnapshotError: Its owner or group cannot be kept, or it changed meanwhile.
        OSError: It cannot be written.
    """
    fd, tmp = tempfile.mkstemp(prefix=".scrub-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            try:
                os.fchown(fh.fileno(), st.st_uid, st.st_gid)
            except PermissionError:
                raise SnapshotError(
                    f"{path}: owned by uid {st.st_uid} gid {st.st_gid}, which this user cannot "
                    "give a new file: scrub it as its owner"
                ) from None
            os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        now = os.lstat(path)
        if (now.st_dev, now.st_ino, now.st_nlink) != (st.st_dev, st.st_ino, 1):
            raise SnapshotError(f"{path}: replaced or linked while it was scrubbed: run again")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def run_scrub(args: argparse.Namespace, stdout: TextIO = sys.stdout) -> int:
    """Scrub each file; exit status 2 when any could not be read or written."""
    status = 0
    for name in args.files:
        path = Path(name)
        try:
            changed = scrub_file(path)
        except SnapshotError as e:
            say_error("specwatch scrub", e)
            status = 2
            continue
        print(f"{path}: {'secrets withheld' if changed else 'nothing to withhold'}", file=stdout)
    return status


__all__ = ["add_scrub_arguments", "run_scrub", "scrub_file"]
