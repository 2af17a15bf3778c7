"""A short benchmark against a real llama.cpp ``llama-server`` (CPU, tiny models, draft model).

Skipped, with the reason shown, when the binary or the start script is absent (see
``tests/realserver.py``).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from specwatch.bench.snapshot import read_snapshot
from tests.realserver import built_commit, running_llama_server
from tests.test_bench_sim import bench_args

# One llama-server at a time, as in a serial run: under pytest-xdist the realserver
# modules share one worker.
pytestmark = [pytest.mark.realserver, pytest.mark.xdist_group("llama-server")]


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    with running_llama_server() as url:
        yield url


def test_short_benchmark_matches_the_servers_own_counts(llama_server: str, tmp_path: Path) -> None:
    from specwatch.commands.bench import run_bench

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
    # The snapshot knows the code: the local process, with the commit of the binary's build.
    process = snap["server"]["process"]
    assert process is not None, snap["server"].get("process_note")
    assert process["build"] == snap["server"]["version"]
    assert process["build"].endswith("-" + built_commit())
