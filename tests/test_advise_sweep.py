"""``specwatch advise SNAP.json ...``: a draft-length sweep that GPU state cannot fool."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import orjson

from specwatch.bench.snapshot import build_snapshot, validate
from specwatch.commands.advise import run_advise
from specwatch.commands.main import build_parser
from specwatch.core.draft_sweep import sweep
from specwatch.core.server import SpecConfig
from specwatch.core.snapshot_records import Snapshot
from tests.test_compare import synthetic_result


def write_snap(
    path: Path,
    k: int,
    tok_s: Sequence[float],
    *,
    concurrency: int = 1,
    clock: float = 1980.0,
    reasons: Mapping[str, float] | None = None,
) -> Path:
    """A snapshot of a benchmark at ``k`` draft tokens (0: speculation off)."""
    result = synthetic_result(tok_s, (clock, clock), reasons=reasons)
    spec = SpecConfig(enabled=False) if k == 0 else SpecConfig(enabled=True, num_draft_tokens=k)
    result = replace(
        result,
        server=replace(result.server, spec=spec),
        config=replace(result.config, concurrency=concurrency),
    )
    doc = validate(build_snapshot(result, ["specwatch", "bench"]))
    path.write_bytes(orjson.dumps(doc))
    return path


def _run(paths: Sequence[Path], *more: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["advise", *map(str, paths), *more])
    out, err = io.StringIO(), io.StringIO()
    code = run_advise(args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_two_snapshots_at_different_gpu_clocks_cannot_be_ranked_and_say_why(
    tmp_path: Path,
) -> None:
    # The story's numbers: k=4 at 89 tok/s on cool GPUs, k=2 at 82.7 on a hot, clocked-down box.
    a = write_snap(tmp_path / "k4.json", 4, [89.1, 88.7, 89.4, 88.9, 89.2])
    b = write_snap(tmp_path / "k2.json", 2, [82.4, 82.5, 82.5, 84.0, 82.6], clock=1600.0)
    code, out, _ = _run([a, b])
    assert code == 1
    assert "batch 1: cannot rank these draft lengths:" in out
    assert "the GPUs ran at different clocks: slowest SM clock 1600 MHz in k2.json" in out
    assert "1980 MHz in k4.json" in out and "best measured" not in out
    code, out, _ = _run([a, b], "--json")
    doc = json.loads(out)
    assert code == 1 and doc["batches"][0]["best_k"] is None
    assert "different clocks" in doc["batches"][0]["cannot_rank"][0]


def test_a_throttle_reason_on_one_side_only_also_refuses_the_pair(tmp_path: Path) -> None:
    a = write_snap(tmp_path / "k4.json", 4, [89.0, 89.2, 88.8])
    b = write_snap(tmp_path / "k2.json", 2, [85.0, 85.2, 84.8], reasons={"hw_slowdown": 0.3})
    code, out, _ = _run([a, b])
    assert code == 1 and "throttle reasons only in k2.json: hw_slowdown" in out


def test_a_sweep_on_like_gpus_gives_the_measured_table_and_the_best_k_per_batch(
    tmp_path: Path,
) -> None:
    paths = [
        write_snap(tmp_path / "off-c1.json", 0, [60.0, 60.3, 59.8], concurrency=1),
        write_snap(tmp_path / "k2-c1.json", 2, [88.0, 88.4, 87.9], concurrency=1),
        write_snap(tmp_path / "k4-c1.json", 4, [95.0, 95.2, 94.9], concurrency=1),
        write_snap(tmp_path / "off-c16.json", 0, [700.0, 702.0, 699.0], concurrency=16),
        write_snap(tmp_path / "k4-c16.json", 4, [610.0, 612.0, 611.0], concurrency=16),
    ]
    code, out, _ = _run(paths)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[1].split() == ["batch", "k=0", "k=2", "k=4"]
    assert lines[2].split() == ["1", "60.0", "88.1", "95.0"]
    assert lines[3].split() == ["16", "700.3", "-", "611.0"]
    assert "batch 1: best measured k=4" in out and "batch 16: best measured off" in out


def test_tok_s_within_noise_is_said_and_an_unknown_k_is_left_out(tmp_path: Path) -> None:
    a = write_snap(tmp_path / "k3.json", 3, [90.0, 91.0, 89.0])
    b = write_snap(tmp_path / "k4.json", 4, [90.5, 89.5, 90.8])
    s = sweep(
        [
            ("k3.json", Snapshot.from_dict(json.loads(a.read_text()))),
            ("k4.json", Snapshot.from_dict(json.loads(b.read_text()))),
        ]
    )
    (batch,) = s.batches
    assert batch.best_k == 4 and batch.within_noise == (3,)
    unknown = write_snap(tmp_path / "unknown.json", 4, [90.0, 90.0])
    doc = json.loads(unknown.read_text())
    doc["server"]["speculative"] = {"enabled": True}
    unknown.write_text(json.dumps(doc))
    code, out, _ = _run([a, b, unknown])
    assert code == 0
    assert "unknown.json: left out, its speculative config does not say" in out
    assert "best measured k=4 (within noise of k=3)" in out


def test_a_file_that_is_not_a_snapshot_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    good = write_snap(tmp_path / "k4.json", 4, [89.0, 89.2])
    code, _, err = _run([good, bad])
    assert code == 2 and err.startswith("specwatch advise: ")
