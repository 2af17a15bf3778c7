"""One parser for every server's version string."""

from __future__ import annotations

import pytest

from specwatch.core.server import version_tuple


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.5.23", (0, 5, 23)),
        ("0.4.6.post5", (0, 4, 6)),
        ("0.33.0", (0, 33, 0)),
        ("v0.33.0rc1", (0, 33, 0)),
        ("0.9.2+cu124", (0, 9, 2)),
        ("0.5", (0, 5, 0)),
        ("1.2.3.4", (1, 2, 3, 4)),
        ("b6500-0c1e570", (6500,)),
        ("b1-0c1e570", (1,)),
        ("b6500", (6500,)),
        (None, ()),
        ("", ()),
        ("weird", ()),
        ("unknown-0c1e570", ()),
    ],
)
def test_version_tuple(text: str | None, expected: tuple[int, ...]) -> None:
    assert version_tuple(text) == expected


def test_versions_compare_by_release_not_by_text() -> None:
    assert version_tuple("0.5.9") < version_tuple("0.5.10") < version_tuple("0.5.16")
    assert version_tuple("0.5") == version_tuple("0.5.0")
    assert version_tuple("0.4.6.post5") < version_tuple("0.5.4")
    assert version_tuple("b6500-0c1e570") > version_tuple("b1-0c1e570")
