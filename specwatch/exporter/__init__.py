"""The headless exporter: a live session's verdict and figures as Prometheus series, the alert
rules and the dashboard that read them."""
