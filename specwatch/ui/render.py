"""Kept for imports written before the split; the renderables live in ``ui.renderables``."""

from __future__ import annotations

from specwatch.ui.renderables import *  # noqa: F403
from specwatch.ui.renderables import __all__ as __all__
