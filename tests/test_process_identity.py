"""Code identity of a real process: the simulator run from a throw-away git checkout."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import specwatch
from specwatch.core.identity import to_json
from specwatch.sources.identity.process import NOTE_REMOTE, identify_server, is_local_host

REPO = Path(specwatch.__file__).resolve().parent.parent
SECRETS = ("decoy-nccl-secret", "decoy-hf-secret", "decoy-key-secret")
MAIN = (
    "import sys\nfrom specwatch.commands.main import main\n"
    "raise SystemExit(main(['sim', *sys.argv[1:]]))\n"
)


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout.strip()


def _checkout(root: Path) -> Path:
    """A git checkout holding a ``simserver`` package, committed, then one uncommitted change."""
    pkg = root / "simserver"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Runs the specwatch simulator."""\n')
    (pkg / "__main__.py").write_text(MAIN)
    (root / "run_sim.py").write_text(MAIN)
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "first")
    with (pkg / "__init__.py").open("a") as fh:
        fh.write("# an uncommitted change\n")
    return root.resolve()


def _start(argv: list[str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GIT_"))}
    env.update(
        PYTHONPATH=str(REPO),
        NCCL_PROTO="LL",
        NCCL_AUTH_TOKEN=SECRETS[0],
        HF_TOKEN=SECRETS[1],
        VLLM_API_KEY=SECRETS[2],
    )
    proc = subprocess.Popen(
        [sys.executable, *argv, "--port", "0", "--gpus", "1"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert " at http://" in line, proc.stderr.read() if proc.stderr else line
    return proc, line.split(" at ")[1].split()[0]


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=10)


@dataclass
class Running:
    proc: subprocess.Popen[str]
    url: str
    checkout: Path


# Its module-scoped fixture is built once: under pytest-xdist the module runs on one worker.
pytestmark = pytest.mark.xdist_group("process-identity")


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    checkout = _checkout(tmp_path_factory.mktemp("identity") / "checkout")
    proc, url = _start(["-m", "simserver", "--dialect", "sglang"], checkout)
    try:
        yield Running(proc, url, checkout)
    finally:
        _stop(proc)


def test_finds_the_process_its_commit_dirty_and_environment(running: Running) -> None:
    identity = identify_server(running.url)
    assert identity.pid == running.proc.pid
    assert identity.cwd == str(running.checkout)
    assert identity.cmdline[1:5] == ("-m", "simserver", "--dialect", "sglang")
    assert identity.package == "simserver"
    assert identity.checkout is not None
    assert identity.checkout.path == str(running.checkout)
    assert identity.checkout.commit == _git(running.checkout, "rev-parse", "HEAD")
    assert identity.checkout.dirty is True
    assert identity.checkout.changed_after_start == ()
    assert identity.env()["NCCL_PROTO"] == "LL"
    assert identity.started_at is not None and abs(identity.started_at - time.time()) < 600
    assert identity.notes == () and identity.warnings == ()


def test_no_secret_reaches_the_json(running: Running) -> None:
    text = json.dumps(to_json(identify_server(running.url)))
    for secret in SECRETS:
        assert secret not in text
    assert "NCCL_AUTH_TOKEN" not in text and "HF_TOKEN" not in text


def test_a_checkout_changed_after_start_is_warned(running: Running) -> None:
    later = time.time() + 30
    _git(running.checkout, "commit", "-q", "-am", "pulled after start")
    git_dir = running.checkout / ".git"
    os.utime(git_dir / "logs" / "HEAD", (later, later))
    edited = running.checkout / "run_sim.py"
    edited.write_text(MAIN + "# edited\n")
    os.utime(edited, (later, later))
    identity = identify_server(running.url)
    assert identity.checkout is not None
    assert identity.checkout.changed_after_start == (
        "HEAD moved after the server started",
        "files changed after the server started: run_sim.py",
    )
    assert any("running code may be older" in w for w in identity.warnings)


def test_a_script_on_the_command_line_names_its_checkout(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "checkout")
    proc, url = _start([str(checkout / "run_sim.py"), "--dialect", "vllm"], tmp_path)
    try:
        identity = identify_server(url)
    finally:
        _stop(proc)
    assert identity.pid == proc.pid
    assert identity.checkout is not None and identity.checkout.path == str(checkout)
    assert identity.checkout.dirty is True


def test_a_remote_server_is_only_noted() -> None:
    identity = identify_server("http://192.0.2.1:8000")  # TEST-NET-1: never this machine
    assert identity.notes == (NOTE_REMOTE,) and identity.pid is None


def test_a_port_nobody_listens_on_is_noted() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: free for this test
        identity = identify_server(f"http://127.0.0.1:{port}")
    assert identity.pid is None
    assert len(identity.notes) == 1 and identity.notes[0].startswith("process not visible")


def test_local_hosts() -> None:
    for host in ("localhost", "127.0.0.2", "::1", "[::1]", "0.0.0.0"):
        assert is_local_host(host), host
    assert not is_local_host("192.0.2.1")


def test_a_proc_file_is_read_up_to_its_limit_in_chunks(tmp_path: Path) -> None:
    from specwatch.sources.identity import process

    data = bytes(range(256)) * (3 * process.READ_CHUNK // 256 + 7)
    path = tmp_path / "table"
    path.write_bytes(data)
    assert process._read(path, 1 << 30) == data
    assert process._read(path, 2 * process.READ_CHUNK + 5) == data[: 2 * process.READ_CHUNK + 5]
    assert process._read(tmp_path / "gone", 10) is None


def test_a_small_proc_file_under_a_large_limit_allocates_what_it_holds() -> None:
    from specwatch.sources.identity import process

    tracemalloc.start()
    try:
        got = process._read(Path("/proc/self/cmdline"), 16 * 1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got  # /proc reports no size, yet the file is read whole
    assert peak < 1024 * 1024  # read(16 MiB) allocated all 16 MiB first
