"""``specwatch bench`` against a simulator started as a child process from a throw-away checkout:
the snapshot records the server's commit and allow-listed environment, and no secret."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import orjson
import pytest

from specwatch.bench.snapshot import load_snapshot, read_snapshot
from specwatch.commands.bench import add_bench_arguments, run_bench
from tests.test_process_identity import SECRETS, _checkout, _git, _start, _stop


def bench_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_bench_arguments(p)
    return p.parse_args(argv)


def test_bench_records_the_commit_and_no_secret(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("bench-identity")
    checkout = _checkout(root / "checkout")
    proc, url = _start(["-m", "simserver", "--dialect", "sglang"], checkout)
    out_dir = root / "snapshots"
    argv = ["--url", url, "-n", "2", "--warmup", "0", "--max-tokens", "16", "--no-gpu"]
    out, err = io.StringIO(), io.StringIO()
    try:
        status = run_bench(
            bench_args([*argv, "--out", str(out_dir)]),
            argv=["specwatch", "bench", *argv],
            stdout=out,
            stderr=err,
        )
    finally:
        _stop(proc)
    assert status == 0, err.getvalue()
    commit = _git(checkout, "rev-parse", "HEAD")
    assert f"commit {commit[:10]} (uncommitted changes)" in out.getvalue()
    [path] = list(Path(out_dir).glob("*.json"))
    raw = read_snapshot(path)
    assert raw["schema_version"] == 5
    process = raw["server"]["process"]
    assert process["pid"] == proc.pid
    assert process["checkout"]["commit"] == commit and process["checkout"]["dirty"] is True
    assert process["environment"]["NCCL_PROTO"] == "LL"
    assert raw["server"]["process_note"] is None
    text = path.read_text()
    for secret in SECRETS:
        assert secret not in text
    for name in ("NCCL_AUTH_TOKEN", "HF_TOKEN", "VLLM_API_KEY"):
        assert name not in text
    snap = load_snapshot(path)
    assert snap.server.process is not None and snap.server.process.commit == commit
    # The simulated SGLang server counts prompt tokens: the load is recorded for each run.
    assert all(r["load"]["prompt_tok_s"] is not None for r in raw["runs"])
    assert orjson.loads(orjson.dumps(raw))["overall"]["prompt_tok_s"]["n"] == 2


def test_a_remote_server_is_recorded_as_null_with_a_note() -> None:
    from specwatch.core.identity import ServerIdentity
    from specwatch.core.snapshot_records import process_note
    from specwatch.sources.identity.process import NOTE_REMOTE

    assert process_note(ServerIdentity(notes=(NOTE_REMOTE,))) == (None, NOTE_REMOTE)
    assert process_note(None) == (None, "not collected")
