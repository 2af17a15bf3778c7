"""The Prometheus alert rules for the exporter's series (``specwatch alert-rules``).

Every rule is tested with ``promtool test rules`` on recorded series (tests/test_alert_rules.py)
and end to end against a real Prometheus and Alertmanager (tests/test_exporter_e2e.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

GROUP = "specwatch"
THROTTLE_REASONS = (
    "SwPowerCap",
    "HwSlowdown",
    "SwThermalSlowdown",
    "HwThermalSlowdown",
    "HwPowerBrakeSlowdown",
)
"""Clock-event reasons that are thermal or power limits (not idle, not a clock setting)."""


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One alerting rule."""

    alert: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str


RULES: tuple[AlertRule, ...] = (
    AlertRule(
        "SpecwatchSpeculationNetNegative",
        "specwatch_speculative_gain_ratio < 1",
        "10m",
        "warning",
        "Speculative decoding is slower than plain decoding on {{ $labels.server }}",
        'Plain per-token time / effective per-token time is {{ $value | printf "%.2f" }} '
        "(below 1 for 10 minutes): turn speculation off or shorten the draft.",
    ),
    AlertRule(
        "SpecwatchAcceptanceCollapsed",
        "specwatch_accept_length / specwatch_reference_accept_length < 0.8",
        "5m",
        "warning",
        "Draft acceptance collapsed on {{ $labels.server }}",
        "Accept length is {{ $value | humanizePercentage }} of its reference: a changed "
        "draft model, sampling settings or prompts (speculation is lossless, so nothing "
        "else notices).",
    ),
    AlertRule(
        "SpecwatchTokSDownExplainedByGpu",
        'specwatch_verdict{cause="gpu_state"} == 1 '
        "and on (server) specwatch_tokens_per_second_ratio < 1",
        "2m",
        "warning",
        "tok/s down on {{ $labels.server }}, explained by GPU state",
        "The slowest busy GPU's SM clock fell and accounts for the drop in tokens per second "
        "(hot, power-limited or throttled GPUs, not the code).",
    ),
    AlertRule(
        "SpecwatchTokSDownNotExplained",
        'specwatch_verdict{cause="not_gpu_state"} == 1 '
        "and on (server) specwatch_tokens_per_second_ratio < 1",
        "2m",
        "critical",
        "tok/s down on {{ $labels.server }}, not explained by GPU state",
        "Tokens per second fell at the same clocks and load: look at the code or the "
        "configuration (a deploy, a flag, a driver).",
    ),
    AlertRule(
        "SpecwatchGpuThrottling",
        'specwatch_gpu_clock_event_reason{reason=~"' + "|".join(THROTTLE_REASONS) + '"} == 1',
        "5m",
        "warning",
        "GPU {{ $labels.gpu }} on {{ $labels.node }} throttled: {{ $labels.reason }}",
        "A thermal or power clock-event reason has been set for 5 minutes.",
    ),
    AlertRule(
        "SpecwatchServerUnreachable",
        "specwatch_server_up == 0",
        "2m",
        "critical",
        "specwatch cannot reach {{ $labels.server }}",
        "The server has not answered specwatch for 2 minutes (down, hung or answering "
        "garbage); its figures are not exported meanwhile.",
    ),
)


def rules_document(for_override: str | None = None) -> dict[str, object]:
    """The rules file as data (``for_override``: every ``for`` set to it, e.g. in tests)."""
    return {
        "groups": [
            {
                "name": GROUP,
                "rules": [
                    {
                        "alert": r.alert,
                        "expr": r.expr,
                        "for": for_override or r.for_,
                        "labels": {"severity": r.severity},
                        "annotations": {"summary": r.summary, "description": r.description},
                    }
                    for r in RULES
                ],
            }
        ]
    }


def _yaml(value: object, indent: int) -> list[str]:
    """Block YAML of the rules document's shapes; scalars as JSON strings (valid YAML)."""
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list):
                out.append(f"{pad}{key}:")
                out.extend(_yaml(item, indent + 2))
            else:
                out.append(f"{pad}{key}: {json.dumps(item)}")
    elif isinstance(value, list):
        for item in value:
            lines = _yaml(item, indent + 2)
            out.append(f"{pad}- {lines[0].lstrip()}")
            out.extend(lines[1:])
    return out


def rules_text(for_override: str | None = None) -> str:
    """The rules file as YAML (what ``specwatch alert-rules`` prints)."""
    head = "# specwatch alert rules: promtool check rules FILE; add FILE to rule_files\n"
    return head + "\n".join(_yaml(rules_document(for_override), 0)) + "\n"


__all__ = ["RULES", "THROTTLE_REASONS", "AlertRule", "rules_document", "rules_text"]
