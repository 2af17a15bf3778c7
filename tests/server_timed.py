"""Benchmark snapshots timed by the simulated server instead of the client's wall clock.

On the real clock the simulated engine stamps every token at its exact step time, but the
client sees it only when both threads get a core: on a loaded 2-core machine each run's wall
time grows by the scheduling delay at its start and end (tens of ms against 0.3 s runs), and
a four-run comparison then swings by ±10% — enough to turn "explained by GPU state" into "no
significant change" (reproduced with two busy loops beside the tests). The verdict tests are
about the comparison, so they judge tok/s on the server's ground truth; the client's figures
are still checked against it (a run can never look faster than the server made it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specwatch.core.stats import summarize
from specwatch.sim.truth import RequestTruth

CAUSALITY_SLACK_S = 1e-6
"""Client and server read the same monotonic clock; this only absorbs float rounding."""


def server_timed(snap: dict[str, Any], truth: Sequence[RequestTruth]) -> dict[str, Any]:
    """``snap`` with each run's wall time, tok/s and load rates from the server's truth.

    Args:
        snap: A validated snapshot of a benchmark at concurrency 1 on the simulator.
        truth: The simulator's finished requests; the measured runs are the last ones.

    Returns:
        A new snapshot dict; ``snap`` is not changed.
    """
    runs: list[dict[str, Any]] = snap["runs"]
    served = list(truth[-len(runs) :])
    assert [r.completion_tokens for r in served] == [r["completion_tokens"] for r in runs]
    new_runs: list[dict[str, Any]] = []
    for run, req in zip(runs, served, strict=True):
        server_wall = req.t_end - req.t_start
        assert server_wall > 0
        # The client sends before the server starts and hears the last token after it left.
        assert run["wall_s"] >= server_wall - CAUSALITY_SLACK_S, (run["wall_s"], server_wall)
        scale = run["wall_s"] / server_wall
        load = dict(run["load"])
        for key in ("running_requests", "prompt_tok_s"):
            if load.get(key) is not None:
                load[key] = load[key] * scale
        new_runs.append(
            {
                **run,
                "wall_s": server_wall,
                "tok_s": req.completion_tokens / server_wall,
                "load": load,
            }
        )
    overall = dict(snap["overall"])
    for key in ("tok_s", "running_requests", "prompt_tok_s"):
        values = [r["tok_s"] if key == "tok_s" else r["load"].get(key) for r in new_runs]
        known = [v for v in values if v is not None]
        if key in overall and known:
            s = summarize(known)
            overall[key] = {
                **overall[key],
                **{k: getattr(s, k) for k in overall[key] if hasattr(s, k)},
            }
    return {**snap, "runs": new_runs, "overall": overall}
