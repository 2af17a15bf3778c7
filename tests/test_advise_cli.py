"""``specwatch advise`` on a recording and on a live simulated server (issue 24, item 3)."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from specwatch.commands.advise import run_advise
from specwatch.commands.main import build_parser
from specwatch.core.draft_advisor import PlainBaseline, advice_lines, advise
from specwatch.core.server import MetricsWindow, ServerInfo
from specwatch.core.step_cost import plain_steps
from specwatch.record import Recorder
from specwatch.session import events as ev
from specwatch.session.advice_watch import Watched, watch_windows
from specwatch.sim.config import SimConfig
from specwatch.sources.http.endpoint import Endpoint
from tests.advisor_sim import (
    held_batch_windows,
    info_of,
    plain_of,
    true_best_k,
    true_step_s,
    vllm_config,
)
from tests.conftest import running_sim

CHAIN: dict[str, Any] = {"num_steps": 3, "num_draft_tokens": 3, "acceptance": (0.8, 0.6, 0.45)}
COST: dict[str, Any] = {"base_step_ms": 11.0, "draft_ms_per_token": 1.0, "plain_step_ms": 10.0}
WALL0 = 1_796_130_000.0


def _config() -> SimConfig:
    return vllm_config(**CHAIN, **COST, batch_step_ms=0.5, spec_batch_step_ms=2.0)


def record_windows(path: Path, info: ServerInfo, windows: Sequence[MetricsWindow]) -> Path:
    """A recording of ``info``'s detection and ``windows`` at their own times."""
    now = [windows[0].t - 1.0 if windows else 0.0]
    rec = Recorder(path, [Endpoint("http://sim")], clock=lambda: now[0], wall_clock=lambda: 0.0)
    rec.start()
    rec(ev.ServerReady(now[0], info))
    for w in windows:
        now[0] = w.t
        rec(ev.MetricsScraped(w))
    rec.stop()
    return path


def _run(argv: list[str], **kw: Any) -> tuple[int, str, str]:
    args = build_parser().parse_args(["advise", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = run_advise(args, stdout=out, stderr=err, **kw)
    return code, out.getvalue(), err.getvalue()


# Its module-scoped fixture is built once: under pytest-xdist the module runs on one worker.
pytestmark = pytest.mark.xdist_group("advise-cli")


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[MetricsWindow]]:
    config = _config()
    batches = [1, 4, 8, 12, 16, 20, 24]
    spec = held_batch_windows(config, batches, windows_per_batch=6, window_s=1.0)
    plain = held_batch_windows(plain_of(config), batches, windows_per_batch=3, window_s=0.5)
    folder = tmp_path_factory.mktemp("advise")
    spec_file = record_windows(folder / "spec.sqlite", info_of(config), spec)
    plain_file = record_windows(folder / "plain.sqlite", info_of(plain_of(config)), plain)
    return spec_file, plain_file, spec


def test_a_recording_with_a_plain_baseline_gives_the_cores_advice(
    recordings: tuple[Path, Path, list[MetricsWindow]],
) -> None:
    spec_file, plain_file, spec = recordings
    code, out, _ = _run([str(spec_file), "--baseline", str(plain_file)])
    assert code == 0
    plain = held_batch_windows(plain_of(_config()), [1, 4, 8, 12, 16, 20, 24], 3, 0.5)
    expected = advise(spec, info_of(_config()), PlainBaseline(plain_steps(plain), "x"))
    lines = out.splitlines()
    assert lines[0] == f"spec.sqlite: {len(spec)} windows"
    assert lines[1] == advice_lines(expected)[0]
    # Without a measured split the step at k'<K may keep all of K's overhead: K stays, and the
    # shorter draft the linear model favours is named with what would decide it.
    assert lines[1] == "recommendation (vllm): keep num_speculative_tokens=3"
    assert "k=2 gains" in out and "--draft-ms MS or a run at k=2 decides" in out
    assert "plain step from plain.sqlite (recorded without speculation)" in out
    code, out, _ = _run([str(spec_file), "--baseline", str(plain_file), "--draft-ms", "1"])
    assert code == 0
    assert out.splitlines()[1].startswith("recommendation (vllm): --speculative-config")


def test_without_a_baseline_the_advice_is_withheld_and_says_why(
    recordings: tuple[Path, Path, list[MetricsWindow]],
) -> None:
    spec_file, _, _ = recordings
    code, out, _ = _run([str(spec_file)])
    assert code == 1
    assert out.splitlines()[1].startswith("advice withheld: no plain-decoding baseline")
    assert "--baseline-itl MS" in out
    assert "acceptance over" in out  # the evidence is still shown
    code, out, _ = _run([str(spec_file), "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["withheld"].startswith("no plain-decoding baseline")
    assert doc["advice"]["recommendation"] is None and doc["advice"]["k_running"] == 3


def test_a_baseline_that_speculates_is_refused(
    recordings: tuple[Path, Path, list[MetricsWindow]],
) -> None:
    spec_file, _, _ = recordings
    code, _, err = _run([str(spec_file), "--baseline", str(spec_file)])
    assert code == 2
    assert "the server speculated (draft tokens 3)" in err


def test_a_range_of_a_recording_is_advised_on_alone(
    recordings: tuple[Path, Path, list[MetricsWindow]],
) -> None:
    spec_file, _, spec = recordings
    # The last 20 s of the recording: batch 24 only (six 1 s windows) and part of batch 20.
    code, out, _ = _run([f"{spec_file}@-20s/-0s", "--baseline-itl", "10", "--json"])
    doc = json.loads(out)
    batches = [b["batch"] for b in doc["advice"]["bins"]]
    assert 0 < doc["windows"] < len(spec) and batches[-1] == 24 and 1 not in batches
    assert doc["source"].startswith("spec.sqlite@-20s/-0s")
    assert code in (0, 1)


def test_a_file_that_is_not_a_recording_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.sqlite"
    bad.write_text("not sqlite")
    code, _, err = _run([str(bad)])
    assert code == 2 and "not a specwatch recording" in err
    code, _, err = _run([str(tmp_path / "missing.sqlite@-1h/-0s")])
    assert code == 2 and "missing.sqlite: no such recording" in err


def test_live_watch_over_http_reads_metrics_only_and_advises() -> None:
    overrides: dict[str, Any] = {**CHAIN, **COST, "warmup_requests": 0, "prefill_ms": 2.0}
    with running_sim("vllm", gpu_count=1, **overrides) as sim:
        sim.world.gpus.set_temperature(sim.world.gpus.spec.ambient_c, pin=True)
        sim.world.gpus.set_power_limit(10_000.0)
        for _ in range(2):
            sim.world.submit(16, 10**9)
        sim.advance(0.5)

        async def advance(seconds: float) -> None:
            sim.advance(seconds)

        async def watch(endpoint: Endpoint, seconds: float, interval_s: float) -> Watched:
            return await watch_windows(
                endpoint, seconds, interval_s, clock=sim.clock.now, sleep=advance
            )

        plain_ms = true_step_s(sim.world.config, 2, 0) * 1000.0
        code, out, err = _run(
            [sim.url, "--seconds", "4", "--baseline-itl", f"{plain_ms}", "--json"], watch=watch
        )
        with sim.world.locked():
            running = len(sim.world.engine.running) + len(sim.world.engine.waiting)
    assert running == 2  # the watch sent no request of its own
    assert "(/metrics only)" in err
    doc = json.loads(out)
    assert code == 0 and doc["windows"] == 4
    assert true_best_k(sim.world.config, 2) == 3
    assert doc["advice"]["recommendation"] == "keep num_speculative_tokens=3"


def test_advise_needs_one_live_source_or_only_snapshots(tmp_path: Path) -> None:
    code, _, err = _run(["http://localhost:1", "a.json"])
    assert code == 2 and "only snapshots" in err


def test_the_subcommand_is_listed_and_its_help_names_the_baseline() -> None:
    parser = build_parser()
    assert "advise" in parser.format_help()
    args = parser.parse_args(["advise", "x.sqlite", "--baseline-itl", "12"])
    assert isinstance(args, argparse.Namespace) and args.baseline_itl == 12.0
    with pytest.raises(SystemExit):
        parser.parse_args(["advise", "x", "--baseline", "a", "--baseline-itl", "3"])


def test_a_known_draft_cost_replaces_the_linear_model(
    recordings: tuple[Path, Path, list[MetricsWindow]],
) -> None:
    spec_file, plain_file, _ = recordings
    code, out, _ = _run([str(spec_file), "--baseline", str(plain_file), "--json"])
    linear = json.loads(out)["advice"]
    code, out, _ = _run(
        [str(spec_file), "--baseline", str(plain_file), "--draft-ms", "1", "--json"]
    )
    split = json.loads(out)["advice"]
    assert code == 0
    assert "linear in k" in linear["assumptions"] and "measured split" in split["assumptions"]
    # The sim's verify grows with the batch whatever k: only the split model sees it lose.
    assert linear["loses_from"] is None
    low, high = split["loses_between"]
    assert low <= 16 <= (high or 24)
    code, _, err = _run([str(spec_file), "--draft-ms", "-1"])
    assert code == 2 and "--draft-ms" in err


def test_a_recorded_command_line_gives_the_vllm_config_to_paste(
    recordings: tuple[Path, Path, list[MetricsWindow]], tmp_path: Path
) -> None:
    from specwatch.core.identity import ServerIdentity

    _, plain_file, spec = recordings
    config = {"method": "eagle3", "model": "/models/draft", "num_speculative_tokens": 3}
    argv = ("python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/target")
    identity = ServerIdentity(pid=1, cmdline=(*argv, "--speculative-config", json.dumps(config)))
    path = tmp_path / "with-argv.sqlite"
    now = [spec[0].t - 1.0]
    rec = Recorder(path, [Endpoint("http://sim")], clock=lambda: now[0], wall_clock=lambda: 0.0)
    rec.start()
    rec(ev.ServerReady(now[0], info_of(_config())))
    rec(ev.ServerIdentified(now[0], identity))
    for w in spec:
        now[0] = w.t
        rec(ev.MetricsScraped(w))
    rec.stop()
    code, out, _ = _run([str(path), "--baseline", str(plain_file), "--draft-ms", "1"])
    assert code == 0
    first = out.splitlines()[1]
    assert first.startswith("recommendation (vllm): --speculative-config '")
    pasted = json.loads(first.split("'")[1])
    assert pasted["method"] == "eagle3" and pasted["model"] == "/models/draft"
    assert "syntax: read from the server's command line" in out
    assert "add your" not in first
