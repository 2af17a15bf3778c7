"""The live session reads the server's code identity once per ready, off the UI thread (issue 14):
the status line shows the commit, the TUI's benchmark records it in its snapshot."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from textual.geometry import Region

from specwatch.core.identity import Checkout, ServerIdentity
from specwatch.core.server import Dialect, ServerInfo
from specwatch.record.codec import decode, encode
from specwatch.session import LiveSession
from specwatch.session.events import BenchFinished, ServerIdentified, ServerReady
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.identity.process import commit_label, with_server_build
from specwatch.ui.app import SpecwatchApp
from specwatch.ui.model import MonitorModel
from specwatch.ui.panes.status import StatusLine, status_parts
from specwatch.ui.settings import AppSettings
from tests.session_world import Collector, drive_until, manual_sim
from tests.sim_testing import FAST

COMMIT = "0c1e5701234567890abcdef0123456789abcdef0"
DIRTY = ServerIdentity(pid=4242, checkout=Checkout("/src/sglang", COMMIT, dirty=True))


class FakeIdentify:
    """Stands in for reading ``/proc``; remembers which thread and URL it was called with."""

    def __init__(self, identity: ServerIdentity = DIRTY) -> None:
        self.identity = identity
        self.threads: list[threading.Thread] = []
        self.urls: list[str] = []

    def __call__(self, base_url: str, info: ServerInfo) -> ServerIdentity:
        self.threads.append(threading.current_thread())
        self.urls.append(base_url)
        return self.identity


def test_commit_label_is_short_and_marks_a_dirty_checkout() -> None:
    assert commit_label(DIRTY) == "0c1e570*"
    clean = ServerIdentity(pid=1, checkout=Checkout("/src", COMMIT, dirty=False))
    assert commit_label(clean) == "0c1e570"
    assert commit_label(ServerIdentity(pid=1, build="b6500-4ad7e2a")) == "4ad7e2a"
    assert commit_label(ServerIdentity(notes=("remote server",))) is None
    assert commit_label(None) is None


def test_only_a_local_llama_server_gets_its_reported_build() -> None:
    llama = ServerInfo(dialect=Dialect.LLAMACPP, base_url="http://h:1", version="b1-0c1e570")
    assert with_server_build(ServerIdentity(pid=7), llama).commit == "0c1e570"
    assert with_server_build(ServerIdentity(), llama).build is None  # remote: not this process
    vllm = ServerInfo(dialect=Dialect.VLLM, base_url="http://h:1", version="0.11.0")
    assert with_server_build(ServerIdentity(pid=7), vllm).build is None


def test_the_status_line_shows_the_commit_beside_the_version() -> None:
    model = MonitorModel()
    model.set_ready(1.0, ServerInfo(dialect=Dialect.SGLANG, base_url="http://h:1", version="0.5.2"))
    words = [p[1] for p in status_parts(model)]
    assert "sglang 0.5.2" in words
    before = model.status_version
    model.set_identity(DIRTY)
    assert model.status_version > before
    assert "sglang 0.5.2 @0c1e570*" in [p[1] for p in status_parts(model)]
    # A restart forgets it until the new process is identified.
    model.set_ready(2.0, ServerInfo(dialect=Dialect.SGLANG, base_url="http://h:1", version="0.5.2"))
    assert "sglang 0.5.2" in [p[1] for p in status_parts(model)]


async def test_the_session_identifies_a_ready_server_off_the_loop() -> None:
    fake = FakeIdentify()
    with manual_sim() as sim:
        seen = Collector()
        session = sim.session(identify=fake)
        session.subscribe(seen)
        async with session:
            await drive_until(sim, lambda: bool(seen.of(ServerIdentified)))
        (ready,) = seen.of(ServerReady)
        (identified,) = seen.of(ServerIdentified)
        assert identified.identity is DIRTY and identified.server == 0
        assert seen.events.index(ready) < seen.events.index(identified)
        assert fake.urls == [sim.url]
        assert fake.threads and fake.threads[0] is not threading.main_thread()


async def test_by_default_the_session_reads_the_process_behind_the_port() -> None:
    # The simulator runs in this process, so the listening process is this one.
    with manual_sim() as sim:
        seen = Collector()
        session = sim.session()
        session.subscribe(seen)
        async with session:
            await drive_until(sim, lambda: bool(seen.of(ServerIdentified)), 15)
        (identified,) = seen.of(ServerIdentified)
        assert identified.identity.pid == os.getpid()
    demo = LiveSession([parse_endpoint("127.0.0.1:1")], demo=sim.server)
    assert demo.identify is None  # an in-process demo would be identified as ourselves


def test_a_recording_keeps_the_identity_event() -> None:
    event = ServerIdentified(3.0, DIRTY, 1)
    assert decode(*encode(event)) == event


async def test_the_app_shows_the_commit_in_the_status_line() -> None:
    with manual_sim() as sim:
        app = SpecwatchApp(
            AppSettings(watch_terminal=False, redraw_s=0.1), sim.session(identify=FakeIdentify())
        )
        async with app.run_test(size=(120, 30)) as pilot:
            await drive_until(
                sim, lambda: app.message_counts["server_identified"] >= 1, 10, 0.1, pilot.pause
            )
            app.redraw()
            await pilot.pause()
            line = app.query_one(StatusLine)
            w, h = line.region.size
            text = "".join(s.text for s in line.render_lines(Region(0, 0, w, h)))
            assert "@0c1e570*" in text


async def test_the_tui_benchmark_records_the_server_identity(tmp_path: Path) -> None:
    from specwatch.core.snapshot_records import BenchConfig

    fake = FakeIdentify()
    with manual_sim(**FAST) as sim:
        seen = Collector()
        session = sim.session(identify=fake)
        session.subscribe(seen)
        async with session:
            await drive_until(sim, lambda: session.server_info() is not None)
            job = session.start_benchmark(tmp_path, BenchConfig(runs=1, warmup=0, max_tokens=8))
            assert job is not None
            await drive_until(sim, lambda: bool(seen.of(BenchFinished)), 20, step_s=0.01)
        (done,) = seen.of(BenchFinished)
        assert done.snapshot_path is not None
        snap = json.loads(done.snapshot_path.read_text())
        process = snap["server"]["process"]
        assert process["checkout"]["commit"] == COMMIT and process["checkout"]["dirty"] is True
        # Read on the job's thread, not the loop's (a front end's UI thread).
        assert threading.main_thread() not in fake.threads
        assert any(t.name == "specwatch-bench" for t in fake.threads)
