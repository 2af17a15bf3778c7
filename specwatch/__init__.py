"""specwatch: live GPU state, token rate and speculative decoding for inference servers."""

from __future__ import annotations

__version__ = "0.1.0"
