"""``specwatch alert-rules``: the shipped ``specwatch/exporter/alert_rules.yml`` as printed;
promtool accepts the file, and every rule fires on recorded series (and not before its
``for``, nor on series it must ignore)."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from specwatch.commands.exporter import RULES_FILE, package_file, rules_text, run_alert_rules

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (Debian: apt-get install -y prometheus; .ci/run does)",
)
SERVER = {"server": "http://10.0.0.7:30000", "model": "meta/llama", "dialect": "sglang"}
GPU = {"node": "gpu-node-1", "gpu": "3"}
RULES: list[dict[str, Any]] = yaml.safe_load(package_file(RULES_FILE))["groups"][0]["rules"]


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inside = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inside}}}", "values": values}


CASES: dict[str, tuple[list[dict[str, str]], dict[str, str], str]] = {
    # alert: (input series, the alert's labels, what $value renders as)
    "SpecwatchSpeculationNetNegative": (
        [_series("specwatch_speculative_gain_ratio", SERVER, "0.9x30")],
        SERVER,
        "0.90",
    ),
    "SpecwatchAcceptanceCollapsed": (
        [
            _series("specwatch_accept_length", SERVER, "1.5x30"),
            _series("specwatch_reference_accept_length", SERVER, "3x30"),
        ],
        SERVER,
        "50%",
    ),
    "SpecwatchTokSDownExplainedByGpu": (
        [
            _series("specwatch_verdict", {**SERVER, "cause": "gpu_state"}, "1x30"),
            _series("specwatch_verdict", {**SERVER, "cause": "not_gpu_state"}, "0x30"),
            _series("specwatch_tokens_per_second_ratio", SERVER, "0.92x30"),
        ],
        {**SERVER, "cause": "gpu_state"},
        "",
    ),
    "SpecwatchTokSDownNotExplained": (
        [
            _series("specwatch_verdict", {**SERVER, "cause": "gpu_state"}, "0x30"),
            _series("specwatch_verdict", {**SERVER, "cause": "not_gpu_state"}, "1x30"),
            _series("specwatch_tokens_per_second_ratio", SERVER, "0.92x30"),
        ],
        {**SERVER, "cause": "not_gpu_state"},
        "",
    ),
    "SpecwatchTokSDownGpuStateUnknown": (
        [
            _series("specwatch_verdict", {**SERVER, "cause": "gpu_state_unknown"}, "1x30"),
            _series("specwatch_verdict", {**SERVER, "cause": "gpu_state"}, "0x30"),
            _series("specwatch_tokens_per_second_ratio", SERVER, "0.92x30"),
        ],
        {**SERVER, "cause": "gpu_state_unknown"},
        "",
    ),
    "SpecwatchGpuThrottling": (
        [
            _series("specwatch_gpu_clock_event_reason", {**GPU, "reason": "SwPowerCap"}, "1x30"),
            _series("specwatch_gpu_clock_event_reason", {**GPU, "reason": "GpuIdle"}, "1x30"),
        ],
        {**GPU, "reason": "SwPowerCap"},
        "",
    ),
    "SpecwatchServerUnreachable": (
        [_series("specwatch_server_up", SERVER, "0x30")],
        SERVER,
        "",
    ),
    "SpecwatchServerWithoutCounters": (
        [
            _series("specwatch_server_counters", SERVER, "0x30"),
            _series("specwatch_server_counters", {**SERVER, "server": "http://b:8000"}, "1x30"),
        ],
        SERVER,
        "",
    ),
}


def _render(template: str, labels: dict[str, str], value: str) -> str:
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], template)
    return re.sub(r"\{\{ \$value[^}]*\}\}", value, text)


def _minutes(text: str) -> int:
    assert text.endswith("m"), text
    return int(text[:-1])


def _test_file(rules: Path) -> dict[str, Any]:
    tests = []
    for rule in RULES:
        series, labels, value = CASES[rule["alert"]]
        wait = _minutes(rule["for"])
        notes = rule["annotations"]
        expected = {
            "exp_labels": {**labels, **rule["labels"]},
            "exp_annotations": {
                "summary": _render(notes["summary"], labels, value),
                "description": _render(notes["description"], labels, value),
            },
        }
        tests.append(
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": f"{wait - 1}m", "alertname": rule["alert"], "exp_alerts": []},
                    {
                        "eval_time": f"{wait + 1}m",
                        "alertname": rule["alert"],
                        "exp_alerts": [expected],
                    },
                ],
            }
        )
    return {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests}


def test_every_rule_has_a_recorded_case() -> None:
    assert set(CASES) == {r["alert"] for r in RULES}
    assert {r["labels"]["severity"] for r in RULES} <= {"warning", "critical"}


def test_the_command_prints_the_rules_file() -> None:
    out = io.StringIO()
    assert run_alert_rules(out=out) == 0
    assert out.getvalue() == rules_text() == package_file(RULES_FILE)
    assert all(f"alert: {r['alert']}" in out.getvalue() for r in RULES)


def test_a_for_override_sets_every_rules_for_and_nothing_else() -> None:
    short = yaml.safe_load(rules_text(for_override="1s"))["groups"][0]["rules"]
    assert [r["for"] for r in short] == ["1s"] * len(RULES)
    assert [{**r, "for": None} for r in short] == [{**r, "for": None} for r in RULES]


@needs_promtool
def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    rules = tmp_path / "specwatch.rules.yml"
    rules.write_text(rules_text())
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(RULES)} rules found" in done.stdout


@needs_promtool
def test_every_rule_fires_on_its_recorded_series(tmp_path: Path) -> None:
    rules = tmp_path / "specwatch.rules.yml"
    rules.write_text(rules_text())
    spec = tmp_path / "specwatch.test.yml"
    spec.write_text(json.dumps(_test_file(rules), indent=1))  # JSON is YAML
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, "test", "rules", str(spec)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@needs_promtool
def test_tok_s_down_with_gpu_state_unknown_fires_only_on_a_drop_it_cannot_explain(
    tmp_path: Path,
) -> None:
    name = "SpecwatchTokSDownGpuStateUnknown"
    unknown = {**SERVER, "cause": "gpu_state_unknown"}
    (rule,) = [r for r in RULES if r["alert"] == name]
    notes = rule["annotations"]
    fired = {
        "exp_labels": {**unknown, **rule["labels"]},
        "exp_annotations": {k: _render(notes[k], unknown, "") for k in ("summary", "description")},
    }

    def case(cause: str, ratio: str, alerts: list[dict[str, Any]]) -> dict[str, Any]:
        verdicts = [
            _series("specwatch_verdict", {**SERVER, "cause": c}, "1x30" if c == cause else "0x30")
            for c in ("gpu_state_unknown", "gpu_state", "no_change")
        ]
        return {
            "interval": "1m",
            "input_series": [
                *verdicts,
                _series("specwatch_tokens_per_second_ratio", SERVER, ratio),
            ],
            "alert_rule_test": [{"eval_time": "10m", "alertname": name, "exp_alerts": alerts}],
        }

    spec = {
        "rule_files": [str(tmp_path / "specwatch.rules.yml")],
        "evaluation_interval": "1m",
        "tests": [
            case("gpu_state_unknown", "0.9x30", [fired]),  # a node without NVML or dcgm
            case("gpu_state_unknown", "1.04x30", []),  # unknown, but tok/s is not down
            case("gpu_state", "0.9x30", []),  # down, and the GPUs explain it: the other alert
            case("no_change", "0.99x30", []),  # within the noise
            case("gpu_state_unknown", "0.9x5 1x25", []),  # the drop recovered
        ],
    }
    (tmp_path / "specwatch.rules.yml").write_text(rules_text())
    (tmp_path / "unknown.test.yml").write_text(json.dumps(spec, indent=1))
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "test", "rules", str(tmp_path / "unknown.test.yml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
async def test_the_unreachable_alert_fires_on_what_a_garbage_server_makes_the_exporter_say(
    tmp_path: Path,
) -> None:
    from tests.test_exporter_health import capture_garbage_episode

    # The exporter's own series, read every half second around the moment the server turned to
    # answering 200 with random bytes, replayed to promtool one reading a minute.
    samples, _, last = await capture_garbage_episode(healthy=3, after_s=3.0, every_s=0.5)
    labels = last["specwatch_server_up"][0][0]
    first_down = next(i for i, (up, _) in enumerate(samples) if up == 0.0)
    assert len(samples) - 1 - first_down >= 3, samples
    assert samples[-1][1] > samples[first_down - 1][1]  # the error counter moved
    (rule,) = [r for r in RULES if r["alert"] == "SpecwatchServerUnreachable"]
    series = [
        _series("specwatch_server_up", labels, " ".join(f"{up:g}" for up, _ in samples)),
        _series(
            "specwatch_source_errors_total",
            {"server": labels["server"], "source": "server"},
            " ".join(f"{e:g}" for _, e in samples),
        ),
    ]
    notes = rule["annotations"]
    fired = {
        "exp_labels": {**labels, **rule["labels"]},
        "exp_annotations": {k: _render(notes[k], labels, "") for k in ("summary", "description")},
    }
    name = rule["alert"]
    spec = {
        "rule_files": [str(tmp_path / "specwatch.rules.yml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": f"{first_down - 1}m", "alertname": name, "exp_alerts": []},
                    {"eval_time": f"{len(samples) - 1}m", "alertname": name, "exp_alerts": [fired]},
                ],
            }
        ],
    }
    (tmp_path / "specwatch.rules.yml").write_text(rules_text())
    (tmp_path / "unreachable.test.yml").write_text(json.dumps(spec, indent=1))
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "test", "rules", str(tmp_path / "unreachable.test.yml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
