"""The Grafana dashboard for the exporter's series (``specwatch dashboard``): speculation figures
next to the clocks, temperatures and throttle reasons that explain them.

Every expression is run against a real Prometheus during the end-to-end scenario and must
return data (tests/test_exporter_e2e.py), so no panel ships empty.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

S = '{server=~"$server"}'
"""The server filter every server panel applies (the dashboard's ``server`` variable)."""
WIDTH = 12
HEIGHT = 8


@dataclass(frozen=True, slots=True)
class Panel:
    """One time-series panel: a title, its unit and its queries (legend, PromQL)."""

    title: str
    unit: str
    queries: tuple[tuple[str, str], ...]
    description: str = ""


PANELS: tuple[Panel, ...] = (
    Panel(
        "Verdict: what explains tok/s",
        "none",
        (("{{cause}}", f"specwatch_verdict{S} == 1"),),
        "1 for the live verdict's current cause (gpu_state, not_gpu_state, load, acceptance...)",
    ),
    Panel(
        "tok/s against the reference, and what the clock predicts",
        "percentunit",
        (
            ("observed {{server}}", f"specwatch_tokens_per_second_ratio{S}"),
            ("clock predicts {{server}}", f"specwatch_clock_predicted_ratio{S}"),
        ),
        "When the two lines move together the GPUs explain the change; when only the observed "
        "one falls, look at code or configuration.",
    ),
    Panel(
        "Generated tok/s",
        "short",
        (
            ("now {{server}}", f"specwatch_generation_tokens_per_second{S}"),
            ("reference {{server}}", f"specwatch_reference_tokens_per_second{S}"),
        ),
    ),
    Panel(
        "Accept length against its reference",
        "short",
        (
            ("now {{server}}", f"specwatch_accept_length{S}"),
            ("reference {{server}}", f"specwatch_reference_accept_length{S}"),
            ("break-even {{server}}", f"specwatch_break_even_accept_length{S}"),
        ),
        "Below break-even, speculation costs more than it gains.",
    ),
    Panel(
        "Draft acceptance",
        "percentunit",
        (
            ("rate {{server}}", f"specwatch_draft_acceptance_rate{S}"),
            ("position {{position}}", f"specwatch_position_acceptance_rate{S}"),
        ),
    ),
    Panel(
        "Verify cost",
        "s",
        (
            ("verify step {{server}}", f"specwatch_verify_step_seconds{S}"),
            ("per token {{server}}", f"specwatch_effective_token_seconds{S}"),
        ),
    ),
    Panel(
        "Speculative gain (plain / effective per-token time)",
        "percentunit",
        (("{{server}}", f"specwatch_speculative_gain_ratio{S}"),),
        "Below 100% speculation is net-negative.",
    ),
    Panel(
        "SM clock / maximum",
        "percentunit",
        (
            (
                "{{node}} GPU {{gpu}}",
                "specwatch_gpu_sm_clock_hertz / specwatch_gpu_max_sm_clock_hertz",
            ),
            ("straggler {{node}} GPU {{gpu}}", "specwatch_gpu_straggler_clock_ratio"),
        ),
    ),
    Panel(
        "GPU temperature",
        "celsius",
        (("{{node}} GPU {{gpu}}", "specwatch_gpu_temperature_celsius"),),
    ),
    Panel(
        "Power / limit",
        "percentunit",
        (
            (
                "{{node}} GPU {{gpu}}",
                "specwatch_gpu_power_watts / specwatch_gpu_power_limit_watts",
            ),
        ),
    ),
    Panel(
        "GPUs with each throttle reason set",
        "short",
        (("{{reason}}", "sum by (reason) (specwatch_gpu_clock_event_reason)"),),
    ),
    Panel(
        "specwatch health",
        "short",
        (
            ("server up {{server}}", f"specwatch_server_up{S}"),
            (
                "errors/s {{server}} {{source}}",
                f"rate(specwatch_source_errors_total{S}[$__rate_interval])",
            ),
            (
                "seconds since a scrape {{server}}",
                f"time() - specwatch_source_last_success_timestamp_seconds{S}",
            ),
            (
                "exporter CPU (cores)",
                'rate(process_cpu_seconds_total{job=~"$job"}[$__rate_interval])',
            ),
        ),
    ),
)


def _panel(i: int, p: Panel) -> dict[str, object]:
    return {
        "id": i + 1,
        "type": "timeseries",
        "title": p.title,
        "description": p.description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": (i % 2) * WIDTH, "y": (i // 2) * HEIGHT, "w": WIDTH, "h": HEIGHT},
        "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + j), "expr": expr, "legendFormat": legend}
            for j, (legend, expr) in enumerate(p.queries)
        ],
    }


def _variable(name: str, query: str) -> dict[str, object]:
    return {
        "name": name,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": name},
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "refresh": 2,
    }


def dashboard() -> dict[str, object]:
    """The dashboard as data."""
    return {
        "title": "specwatch: speculation and GPU state",
        "uid": "specwatch",
        "tags": ["specwatch", "speculative-decoding", "gpu"],
        "schemaVersion": 39,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "10s",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                _variable("job", "label_values(specwatch_exporter_info, job)"),
                _variable("server", "label_values(specwatch_server_up, server)"),
            ]
        },
        "panels": [_panel(i, p) for i, p in enumerate(PANELS)],
    }


def expressions() -> list[str]:
    """Every PromQL expression of the dashboard, as written (with its variables)."""
    return [expr for p in PANELS for _, expr in p.queries]


def dashboard_text() -> str:
    """The dashboard JSON (what ``specwatch dashboard`` prints; Grafana: Import)."""
    return json.dumps(dashboard(), indent=1) + "\n"


__all__ = ["PANELS", "Panel", "dashboard", "dashboard_text", "expressions"]
