"""Host CPU contention named by ``compare``: a real ``llama-server`` benchmarked twice, the second
time beside CPU hogs (one busy process per core, started and stopped here).

Skipped, with the reason shown, when the binary or the start script is absent (see
``tests/realserver.py``).
"""

from __future__ import annotations

import io
import multiprocessing
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from specwatch.bench.snapshot import load_snapshot
from specwatch.core.compare import compare
from specwatch.core.outcomes import Outcome
from tests.realserver import running_llama_server
from tests.test_bench_sim import bench_args

pytestmark = [pytest.mark.realserver, pytest.mark.slow, pytest.mark.xdist_group("llama-server")]


def _hog(stop: float) -> None:
    while time.monotonic() < stop:
        pass


@contextmanager
def cpu_hogs(n: int, limit_s: float = 120.0) -> Iterator[list[int]]:
    """``n`` busy processes, each ending by itself after ``limit_s`` should the test die."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hog, args=(time.monotonic() + limit_s,)) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        yield [p.pid for p in procs if p.pid is not None]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(timeout=10)


def _bench(url: str, out: Path, label: str) -> Path:
    from specwatch.commands.bench import run_bench

    # five runs of 512 tokens: the quiet side shares the machine with the rest of the suite, and
    # three short runs left its spread wider than the hogs' effect
    argv = ["--url", url, "-n", "5", "--warmup", "1", "--max-tokens", "512"]
    argv += ["--out", str(out), "--no-gpu", "--label", label]
    stdout, stderr = io.StringIO(), io.StringIO()
    status = run_bench(
        bench_args(argv), argv=["specwatch", "bench", *argv], stdout=stdout, stderr=stderr
    )
    assert status == 0, stderr.getvalue()
    (path,) = [p for p in out.iterdir() if label in p.name]
    return path


def test_cpu_hogs_beside_the_second_benchmark_are_named_host_contention(tmp_path: Path) -> None:
    cores = os.cpu_count() or 1
    with running_llama_server("plain") as url:
        a = load_snapshot(_bench(url, tmp_path, "quiet"))
        # two hogs a core: the quiet side already shares the machine with the suite's other
        # worker, and one hog a core took only 0.4 cores more than that worker did (a CI run)
        with cpu_hogs(2 * cores) as hogs:
            b = load_snapshot(_bench(url, tmp_path, "hogged"))
    ha, hb = a.host_cpu, b.host_cpu
    assert ha is not None and hb is not None
    assert ha.server_local and hb.server_local
    assert ha.server_wait_ratio is not None and hb.server_wait_ratio is not None
    # The hogs took CPU the server's threads wanted, and the scan names them.
    assert hb.server_wait_ratio > ha.server_wait_ratio
    assert hb.others_cores is not None and ha.others_cores is not None
    assert hb.others_cores > ha.others_cores
    hogged = [c for c in hb.competitors if c.pid in set(hogs)]
    assert hogged, hb.competitors
    assert sum(c.cores for c in hogged) > 0.3
    c = compare(a, b, a_name="quiet", b_name="hogged")
    assert c.verdict is Outcome.HOST, c.reason
    assert "host CPU contention in hogged" in c.reason
    assert c.verdict.exit_code == 9
    rows = {r.name: r for r in c.rows if r.section == "host"}
    assert rows["server waited for a CPU"].differs
