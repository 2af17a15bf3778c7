"""GPUs of any node read from dcgm-exporter."""
