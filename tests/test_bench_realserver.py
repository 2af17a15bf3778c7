"""A short benchmark against a real llama.cpp ``llama-server`` (CPU, tiny models, draft model).

Skipped, with the reason shown, when the binary or the start script is absent; build it with
``../shared/tools/llama-server/build-llama-server.sh``.
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from specwatch.bench.snapshot import read_snapshot
from tests.test_bench_sim import bench_args

pytestmark = pytest.mark.realserver

HOME = Path(
    os.environ.get("REALSERVER_HOME")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specwatch-realserver"
)
BIN = Path(os.environ.get("LLAMA_SERVER_BIN") or HOME / "bin" / "llama-server")
TOOLS = Path(__file__).resolve().parents[1].parent / "shared" / "tools" / "llama-server"
SCRIPT = TOOLS / "start-llama-server.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    if not BIN.exists():
        pytest.skip(f"no llama-server at {BIN} (run build-llama-server.sh)")
    if not SCRIPT.exists():
        pytest.skip(f"no start script at {SCRIPT}")
    port = _free_port()
    started = subprocess.run(
        ["bash", str(SCRIPT), str(port), "draft"], capture_output=True, text=True, timeout=180
    )
    if started.returncode != 0:
        pytest.fail(f"llama-server did not start: {started.stderr.strip().splitlines()[-1:]}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(port)], capture_output=True, timeout=30)


def test_short_benchmark_matches_the_servers_own_counts(llama_server: str, tmp_path: Path) -> None:
    from specwatch.bench.cli import run_bench

    argv = ["--url", llama_server, "-n", "2", "--warmup", "1", "--max-tokens", "128"]
    argv += ["--out", str(tmp_path), "--no-gpu", "--label", "real"]
    out, err = io.StringIO(), io.StringIO()
    status = run_bench(bench_args(argv), argv=["specwatch", "bench", *argv], stdout=out, stderr=err)
    assert status == 0, err.getvalue()
    assert "  Run 2/2: 128 tokens in " in out.getvalue()
    (path,) = tmp_path.iterdir()
    snap = read_snapshot(path)
    assert snap["server"]["dialect"] == "llamacpp"
    assert snap["server"]["speculative"]["enabled"] is True
    assert len(snap["runs"]) == 2
    for run in snap["runs"]:
        timings = run["server_stats"]["timings"]
        # The client's count is the server's own: timings.predicted_n of the same request.
        assert run["completion_tokens"] == timings["predicted_n"] == 128
        assert run["prompt_tokens"] == timings["prompt_n"] + timings.get("cache_n", 0)
        assert run["tok_s"] > 0 and run["decode_tok_s"] > 0
        # Counters move at request end: the deltas over the run are this request's.
        counters = run["server_counters"]
        assert counters["llamacpp:tokens_predicted_total"] == 128
        assert counters["llamacpp:spec_decode_num_draft_tokens_total"] == timings["draft_n"]
        accepted = counters["llamacpp:spec_decode_num_accepted_tokens_total"]
        assert accepted == timings["draft_n_accepted"]
    assert snap["overall"]["total_tokens"] == 256
