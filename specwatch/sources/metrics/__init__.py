"""A server's /metrics: the exposition parser, counters and histograms, filtered scrapes,
replicas and windowed readings."""
