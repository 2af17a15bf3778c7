"""placeholder"""

from __future__ import annotations


def dashboard_text() -> str:
    """The Grafana dashboard JSON."""
    return "{}\n"
