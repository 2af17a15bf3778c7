"""The token-rate graph's windows: what ``--window`` offers and what the panes draw."""

WINDOWS: dict[str, float] = {"1m": 60.0, "5m": 300.0, "15m": 900.0, "1h": 3600.0}
"""The windows by name, in seconds."""

__all__ = ["WINDOWS"]
