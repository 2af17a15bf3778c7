"""The headless core: pure models, statistics and logic. Never imports textual or rich."""
