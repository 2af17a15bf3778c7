"""A fleet and its GPUs read through a Prometheus server."""
