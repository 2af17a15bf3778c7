"""compare with the server's code identity (schema 3), load figures and hostile strings."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import orjson

from specwatch.bench.report import comparison_lines
from specwatch.bench.snapshot import validate, write_snapshot
from specwatch.commands.compare import add_compare_arguments, run_compare
from specwatch.core.compare import compare
from specwatch.core.identity import Checkout, LoadedLibrary, ServerIdentity, to_json
from specwatch.core.outcomes import Outcome
from specwatch.core.snapshot_records import Snapshot
from tests.test_compare import STORY_AFTER, STORY_BEFORE, snap_dict

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40
HOSTILE = "\x1b]0;TITLE\x07\x1b[2J"


def identity(commit: str = COMMIT_A, **env: str) -> ServerIdentity:
    return ServerIdentity(
        pid=4242,
        executable="/usr/bin/python3",
        cmdline=("python3", "-m", "sglang.launch_server"),
        environment=tuple(sorted({"NCCL_ALGO": "Ring", **env}.items())),
        package="sglang",
        package_version="0.5.4",
        checkout=Checkout(path="/src/sglang", commit=commit, dirty=False),
        libraries=(
            LoadedLibrary("nccl", "2.27.5", "/lib/libnccl.so.2"),
            LoadedLibrary("torch", "2.8.0", "/site/torch/lib/libtorch.so"),
        ),
    )


def with_identity(d: dict[str, Any], ident: ServerIdentity | None) -> Snapshot:
    d["server"]["process"] = None if ident is None else to_json(ident)
    return Snapshot.from_dict(validate(d))


def test_only_nccl_proto_differs_and_compare_names_it() -> None:
    a = with_identity(snap_dict(STORY_BEFORE), identity(NCCL_PROTO="LL"))
    b = with_identity(snap_dict(STORY_AFTER), identity(NCCL_PROTO="Simple"))
    c = compare(a, b)
    code = {r.name: r for r in c.rows if r.section == "code"}
    assert code["NCCL_PROTO"].a == "LL" and code["NCCL_PROTO"].b == "Simple"
    assert code["NCCL_PROTO"].differs
    assert not code["commit"].differs and not code["NCCL"].differs
    assert "NCCL_ALGO" not in code  # equal variables are not listed
    assert c.code_summary == "same commit, but NCCL_PROTO: LL -> Simple"
    assert c.reason.startswith("same commit, but NCCL_PROTO: LL -> Simple; tok/s")
    text = "\n".join(comparison_lines(c, a, b))
    assert "NCCL_PROTO" in text and "Simple" in text


def test_same_identity_puts_same_code_in_front_of_the_verdict() -> None:
    a = with_identity(snap_dict(STORY_BEFORE), identity())
    b = with_identity(snap_dict(STORY_AFTER, clocks=(1950.0, 1830.0)), identity())
    c = compare(a, b)
    assert c.verdict is Outcome.GPU
    assert c.code_summary == "same code and libraries"
    assert c.reason.startswith("same code and libraries; tok/s")
    shown = {r.name: (r.a, r.b) for r in c.rows if r.section == "code"}
    assert shown["commit"] == ("aaaaaaaaaa", "aaaaaaaaaa")
    assert shown["NCCL"] == ("2.27.5", "2.27.5") and shown["torch"] == ("2.8.0", "2.8.0")
    assert shown["uncommitted changes"] == ("no", "no")
    assert c.to_dict()["code"]["same_code_and_libraries"] is True


def test_different_commits_are_both_named() -> None:
    a = with_identity(snap_dict(STORY_BEFORE), identity(COMMIT_A))
    b = with_identity(snap_dict(STORY_AFTER), identity(COMMIT_B))
    c = compare(a, b)
    assert c.verdict is Outcome.CODE
    assert "commit aaaaaaaaaa → bbbbbbbbbb" in c.reason
    lines = comparison_lines(c, a, b)
    assert any("aaaaaaaaaa" in line and "bbbbbbbbbb" in line for line in lines)


def test_a_remote_server_has_no_identity_and_a_note() -> None:
    d = snap_dict(STORY_BEFORE)
    d["server"]["process_note"] = "remote server: the process identity is read only for ..."
    a = with_identity(d, None)
    b = with_identity(snap_dict(STORY_AFTER), identity())
    c = compare(a, b, a_name="a.json")
    assert a.server.process is None
    assert c.code_summary is None
    assert any(n.startswith("a.json: server code identity remote server") for n in c.notes)


def test_recorded_load_turns_the_verdict_to_load_changed() -> None:
    a_d, b_d = snap_dict(STORY_BEFORE), snap_dict(STORY_AFTER)
    for d, running in ((a_d, 1.0), (b_d, 4.0)):
        d["overall"]["running_requests"] = {**d["overall"]["running_requests"], "mean": running}
    c = compare(Snapshot.from_dict(a_d), Snapshot.from_dict(b_d))
    assert c.verdict is Outcome.LOAD and c.verdict.exit_code == 6
    assert c.load_changes == ("running requests 1.0 → 4.0",)
    assert any(r.section == "load" and r.differs for r in c.rows)


def test_load_is_worked_out_from_the_runs_counters() -> None:
    d = snap_dict(STORY_BEFORE)
    run = d["runs"][0]
    run["server_counters"] = {
        "sglang:prompt_tokens_total": 30.0 * 4,
        "sglang:e2e_request_latency_seconds_sum": run["wall_s"] * 2,
    }
    del run["load"]
    snap = Snapshot.from_dict(validate(d))
    assert snap.runs[0].load.running_requests == 2.0
    assert snap.runs[0].load.prompt_tok_s == 120.0 / run["wall_s"]


def hostile_snapshots() -> tuple[dict[str, Any], dict[str, Any]]:
    evil = identity(COMMIT_A, NCCL_PROTO=HOSTILE)
    evil_json = to_json(evil)
    evil_json["package"] = HOSTILE
    evil_json["checkout"]["commit"] = HOSTILE + "c0ffee"
    evil_json["libraries"][0]["version"] = HOSTILE
    out = []
    for tok_s, proto in ((STORY_BEFORE, "LL"), (STORY_AFTER, HOSTILE)):
        d = snap_dict(tok_s, label=HOSTILE, version=HOSTILE)
        d["server"]["model"] = HOSTILE
        d["server"]["launch_args"] = {"tp_size": 8, HOSTILE: HOSTILE}
        d["config"]["prompts_source"] = HOSTILE
        d["gpu_environment"]["driver_version"] = HOSTILE
        d["server"]["process"] = {**evil_json, "environment": {"NCCL_PROTO": proto}}
        out.append(validate(d))
    return out[0], out[1]


def test_hostile_strings_in_every_shown_field_never_reach_the_terminal(tmp_path: Path) -> None:
    a_d, b_d = hostile_snapshots()
    a, b = Snapshot.from_dict(a_d), Snapshot.from_dict(b_d)
    c = compare(a, b, a_name=HOSTILE + ".json", b_name="b.json")
    text = "\n".join(comparison_lines(c, a, b, show_all=True))
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;TITLE\\x07" in text  # shown, not acted on
    # Every field was shown: label, version, model, argument, driver, package, commit, NCCL.
    assert text.count("\\x1b") >= 8

    pa = write_snapshot(a_d, tmp_path)
    pb = write_snapshot(b_d, tmp_path)
    p = argparse.ArgumentParser()
    add_compare_arguments(p)
    out, err = io.StringIO(), io.StringIO()
    run_compare(p.parse_args([str(pa), str(pb), "--all"]), stdout=out, stderr=err)
    assert "\x1b" not in out.getvalue() + err.getvalue()
    assert "\\x1b]0;TITLE" in out.getvalue()
    out = io.StringIO()
    run_compare(p.parse_args([str(pa), str(pb), "--json"]), stdout=out, stderr=err)
    assert "\x1b" not in out.getvalue()  # JSON escapes it as \u001b
    assert orjson.loads(out.getvalue())["a"]


def test_a_configuration_change_is_named_and_same_code_never_stands_beside_it(
    tmp_path: Path,
) -> None:
    args = {"tp_size": 8, "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3}
    a = with_identity(snap_dict(STORY_BEFORE, launch_args=args), identity())
    faster = {**args, "speculative_num_steps": 5}
    for after in (STORY_BEFORE, STORY_AFTER):  # within noise, and beyond it
        b = with_identity(snap_dict(after, launch_args=faster), identity())
        c = compare(a, b)
        assert c.verdict is Outcome.CONFIG and c.wording == "configuration changed"
        assert c.reason.startswith(
            "configuration changed: draft length 3 → 5 (speculative_num_steps); tok/s"
        )
        assert c.code is not None and c.code.same_code_and_libraries
        assert c.code_summary is None and "same code" not in c.reason
        d = c.to_dict()
        assert d["exit_code"] == 8 and d["verdict"] == "configuration changed"
        assert d["configuration"]["differences"] == [
            {"name": "draft length", "a": "3", "b": "5", "origin": "speculative_num_steps"}
        ]
        assert d["configuration"]["a"]["settings"]["tensor parallel"]["value"] == "8"
    paths = []
    for label, tok_s, launch in (("a", STORY_BEFORE, args), ("b", STORY_AFTER, faster)):
        d = snap_dict(tok_s, launch_args=launch)
        d["server"]["process"] = to_json(identity())
        d["label"] = label
        paths.append(write_snapshot(validate(d), tmp_path))
    p = argparse.ArgumentParser()
    add_compare_arguments(p)
    out = io.StringIO()
    assert run_compare(p.parse_args([str(x) for x in paths]), stdout=out) == 8
    text = out.getvalue()
    assert "Verdict: configuration changed" in text and "same code" not in text
    assert "[launch]" in text and "draft length" in text
