"""Issue 21, item 11: lines are laid out by priority, whole figures dropped, never a number cut
inside (``p99 6…``, ``running 3.0 vs 3.``)."""

from __future__ import annotations

import pytest
from rich.style import Style

from specwatch.ui.panes.load import load_text
from specwatch.ui.panes.status import status_text
from specwatch.ui.panes.verdict import verdict_text
from tests.scene import VERDICT_SCENES, build_scene, verdict_scene

STYLES = {k: Style() for k in ("label", "value", "dim", "text", "ok", "bad", "gpu", "load")}
STYLES["paused"] = Style()


SCENE = build_scene()


@pytest.mark.parametrize("width", (20, 29, 35, 41, 44, 50, 60, 80))
def test_load_pane_drops_whole_figures(width: int) -> None:
    full = load_text(SCENE, STYLES).plain.splitlines()
    fitted = load_text(SCENE, STYLES, width).plain.splitlines()
    assert len(fitted) == len(full)
    for line, whole in zip(fitted, full, strict=True):
        assert len(line) <= width or line.count(" ") <= 2, line
        assert whole.startswith(line.rstrip()) or all(
            piece in whole for piece in line.split("  ") if piece
        ), (line, whole)
        assert "…" not in line


@pytest.mark.parametrize("width", (40, 78, 98, 118, 158))
@pytest.mark.parametrize("kind", VERDICT_SCENES)
def test_verdict_and_status_lines_fit_whole(width: int, kind: str) -> None:
    line = verdict_text(verdict_scene(kind).state(), STYLES, width).plain
    head = line.split(" · ")[0]
    assert len(line) <= width or line == head, line
    status = status_text(SCENE, STYLES, width).plain
    assert len(status) <= width or " · " not in status, status
