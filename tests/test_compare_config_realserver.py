"""``compare`` across a real llama-server restarted with another draft length, then without
speculation: the verdict is **configuration changed**, naming the arguments, never "same code".

Skipped, with the reason shown, when the binary or the start script is absent (see
``tests/realserver.py``).
"""

from __future__ import annotations

import asyncio
import io
import threading
from pathlib import Path

import httpx
import orjson
import pytest

from specwatch.commands.bench import run_bench
from specwatch.commands.compare import run_compare
from specwatch.core.outcomes import Outcome
from specwatch.session import events as ev
from specwatch.session.live import LiveSession
from specwatch.session.verdict_state import LiveVerdictState, snapshot_reference
from specwatch.sources.http.endpoint import parse_endpoint
from tests.realserver import running_llama_server
from tests.test_bench_sim import bench_args, compare_args

pytestmark = [pytest.mark.realserver, pytest.mark.xdist_group("llama-server")]


def _bench(url: str, out: Path, label: str) -> Path:
    argv = ["--url", url, "-n", "2", "--warmup", "1", "--max-tokens", "64"]
    argv += ["--out", str(out), "--no-gpu", "--label", label]
    err = io.StringIO()
    status = run_bench(
        bench_args(argv), argv=["specwatch", "bench", *argv], stdout=io.StringIO(), stderr=err
    )
    assert status == 0, err.getvalue()
    (path,) = sorted(out.glob(f"*{label}*.json"))
    return path


def _compare(a: Path, b: Path) -> tuple[int, str, dict[str, object]]:
    text, js = io.StringIO(), io.StringIO()
    status = run_compare(compare_args([str(a), str(b)]), stdout=text, stderr=io.StringIO())
    assert run_compare(compare_args([str(a), str(b), "--json"]), stdout=js) == status
    return status, text.getvalue(), orjson.loads(js.getvalue())


async def _live_verdict(url: str, reference: Path) -> LiveVerdictState:
    """The live verdict of ``url`` against the snapshot ``reference`` once it judges, under
    64-token completions sent back to back."""
    from specwatch.bench.snapshot import load_snapshot

    judged: asyncio.Future[LiveVerdictState] = asyncio.get_running_loop().create_future()
    loop = asyncio.get_running_loop()

    def settle(state: LiveVerdictState) -> None:
        if not judged.done():
            judged.set_result(state)

    def on(event: ev.SessionEvent) -> None:
        if isinstance(event, ev.VerdictChanged) and event.state.judgement is not None:
            loop.call_soon_threadsafe(settle, event.state)

    stop = threading.Event()

    def load() -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                body = {"prompt": "Once upon a time", "max_tokens": 64, "temperature": 0}
                client.post(url + "/v1/completions", json=body).raise_for_status()

    sender = threading.Thread(target=load, daemon=True)
    sender.start()
    reference_ = snapshot_reference(load_snapshot(reference), reference.name)
    session = LiveSession([parse_endpoint(url)], reference=reference_, host=None)
    session.subscribe(on)
    try:
        async with session:
            return await asyncio.wait_for(judged, 120)
    finally:
        stop.set()
        sender.join(timeout=60)


def test_draft_length_and_speculation_off_are_configuration_changes(tmp_path: Path) -> None:
    with running_llama_server("draft", env={"DRAFT_MAX": "4"}) as url:
        _bench(url, tmp_path / "warm", "first")
        # A second benchmark of the same server: its /slots now names the draft type.
        four = _bench(url, tmp_path, "max4")
    with running_llama_server("draft", env={"DRAFT_MAX": "8"}) as url:
        eight = _bench(url, tmp_path, "max8")  # a fresh server: /slots names no type yet
        live = asyncio.run(_live_verdict(url, four))
    with running_llama_server("plain") as url:
        off = _bench(url, tmp_path, "plain")

    status, text, js = _compare(four, eight)
    assert status == Outcome.CONFIG.exit_code == 8, text
    assert "Verdict: configuration changed" in text
    assert "draft length 4 → 8 (--spec-draft-n-max)" in text
    assert "same code" not in text
    assert js["verdict"] == "configuration changed"
    configuration = js["configuration"]
    assert isinstance(configuration, dict)
    assert [d["name"] for d in configuration["differences"]] == ["draft length"]
    rows = {r["name"]: r for r in js["rows"]}  # type: ignore[attr-defined]
    # /slots named the type only for the warm server; the command line says it for both
    assert rows["speculative algorithm"]["a"] == rows["speculative algorithm"]["b"]
    assert rows["speculative algorithm"]["b"] == "draft-simple"
    assert not rows["speculative algorithm"]["differs"]
    # the accept length the bench calls authoritative, the server's counters', has its row
    for side, snap in (("a", four), ("b", eight)):
        runs = orjson.loads(snap.read_bytes())["runs"]
        counted = [r["server_accept_length"] for r in runs]
        assert all(c is not None and c >= 1.0 for c in counted), runs
        want = f"{sum(counted) / len(counted):.2f}"
        assert rows["accept length (server)"][side] == want, rows["accept length (server)"]

    # The live verdict against the first snapshot says the same, naming what changed.
    assert live.judgement is not None, live
    assert live.judgement.reasons[0] == (
        "configuration changed: draft length 4 → 8 (--spec-draft-n-max)"
    ), live.judgement.reasons

    status, text, js = _compare(eight, off)
    assert status == 8, text
    assert "Verdict: configuration changed" in text
    assert "speculative method draft-simple → none" in text
    assert "same code" not in text
    configuration = js["configuration"]
    assert isinstance(configuration, dict)
    names = [d["name"] for d in configuration["differences"]]
    assert names[:3] == ["speculative method", "draft length", "draft model"]
    rows = {r["name"]: r for r in js["rows"]}  # type: ignore[attr-defined]
    assert rows["accept length (server)"]["b"] == "—"  # no speculation: no counters
    assert "--spec-draft-p-min" in names
