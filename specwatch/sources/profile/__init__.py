"""A server's own profiler: asking it from outside, waiting for its trace files, reading them."""
