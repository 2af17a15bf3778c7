"""No secret leaves the server's process: a simulated server started the way real deployments
start vLLM and SGLang, with secrets of every common shape in its environment and command line;
none reaches a snapshot, probe's JSON or text, or a recording, while performance settings do.
Then the rule itself, over generated names and URLs, and files written before the rule."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from specwatch.bench.snapshot import load_snapshot, read_snapshot
from specwatch.commands.main import main
from specwatch.commands.scrub import scrub_file
from specwatch.core.identity import ServerIdentity, from_json, to_json
from specwatch.core.redaction import (
    HARMLESS_WORDS,
    SECRET_WORDS,
    WITHHELD,
    is_secret_name,
    redact_argv,
    redact_text,
    redact_value,
)
from specwatch.core.server import Dialect, ServerInfo
from specwatch.record import codec
from specwatch.session import events as ev
from specwatch.sources.identity.process import identify_server
from tests.test_bench_identity import bench_args
from tests.test_process_identity import REPO, _checkout

# Each value is unique so that a leak anywhere names its source.
SECRET_ENV = {
    "SGLANG_DB_PASS": "s3cr3t-db-pass-0001",
    "VLLM_PASSWD": "s3cr3t-passwd-0002",
    "VLLM_HF_PAT": "ghp_s3cr3tGithubToken0003",
    "NCCL_IB_PASSPHRASE": "s3cr3t-passphrase-0004",
    "SGLANG_BEARER": "s3cr3t-bearer-0005",
    "VLLM_SESSION_COOKIE": "s3cr3t-cookie-0006",
    "VLLM_S3_URL": "s3://AKIAS3CR3T0007:s3cr3t-s3-0007@bucket/model",
    "TORCH_HUB_URL": "https://user:s3cr3t-hub-0008@hub.example/",
    "HF_TOKEN": "s3cr3t-hf-0009",
    "AWS_SECRET_ACCESS_KEY": "s3cr3t-aws-0010",
    "OPENAI_API_KEY": "s3cr3t-openai-0011",
    "VLLM_API_KEY": "s3cr3t-vllm-key-0012",
    "VLLM_PRIVATE_KEY_PEM": "s3cr3t-pem-0013",
}
SECRET_ARGS = [
    "--key",
    "s3cr3t-key-0101",
    "--passwd",
    "s3cr3t-passwd-0102",
    "-k",
    "s3cr3t-k-0103",
    "--credentials",
    "s3cr3t-creds-0104",
    "--auth",
    "s3cr3t-auth-0105",
    "--access-key-id",
    "s3cr3t-akid-0106",
    "--database-url",
    "postgres://admin:s3cr3t-db-0107@db/x",
    "--model",
    "https://user:s3cr3t-model-0108@host/m",
    "--api-key",
    "s3cr3t-api-0109",
    "--api-key=s3cr3t-api-0110",
    "--hf-token",
    "s3cr3t-hf-0111",
    "--secret-key=s3cr3t-secret-0112",
    "--token",
    "s3cr3t-token-0113",
    "--ssl-keyfile-password",
    "s3cr3t-ssl-0114",
    "--kv-transfer-config",
    '{"kv_role": "kv_both", "password": "s3cr3t-json-0115",'
    ' "aws_secret_access_key": "s3cr3t-json-0116"}',
    "--header",
    "Authorization: Bearer s3cr3t-bearer-0117",
    "--openai-api-key",
    "s3cr3t-openai-0118",
]
PERF_ENV = {"NCCL_PROTO": "LL", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
PERF_ARGS = [
    "--tensor-parallel-size",
    "8",
    "--speculative-config",
    '{"method": "eagle3", "num_speculative_tokens": 3}',
]
SECRETS = [
    *SECRET_ENV.values(),
    *(a.split("=", 1)[-1] for a in SECRET_ARGS if "s3cr3t" in a and not a.startswith("{")),
    "s3cr3t-json-0115",
    "s3cr3t-json-0116",
    "s3cr3t-bearer-0117",
    "s3cr3t-db-0107",
    "s3cr3t-model-0108",
]
# The simulator cannot parse the deployment's options: they ride between two markers that the
# wrapper drops, so they are on the process's real command line all the same.
WRAPPER = (
    "import sys\nfrom specwatch.commands.main import main\n"
    "a = sys.argv[1:]\n"
    "a = a[: a.index('::')] + a[a.index('::', a.index('::') + 1) + 1 :]\n"
    "raise SystemExit(main(['sim', *a]))\n"
)


def leaked(text: str) -> list[str]:
    """The secrets found in ``text``, and the parts that identify them."""
    found = [s for s in SECRETS if s in text]
    return found + [part for part in ("s3cr3t",) if part in text and not found]


@dataclass
class Deployment:
    proc: subprocess.Popen[str]
    url: str
    root: Path


# Its module-scoped fixture is built once: under pytest-xdist the module runs on one worker.
pytestmark = pytest.mark.xdist_group("secrets")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("secrets")
    checkout = _checkout(root / "checkout")
    (checkout / "deploy.py").write_text(WRAPPER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GIT_"))}
    env.update(PYTHONPATH=str(REPO), **SECRET_ENV, **PERF_ENV)
    argv = [sys.executable, "deploy.py", "::", *SECRET_ARGS, *PERF_ARGS, "::"]
    proc = subprocess.Popen(
        [*argv, "--dialect", "vllm", "--port", "0", "--gpus", "1"],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert " at http://" in line, proc.stderr.read() if proc.stderr else line
    try:
        yield Deployment(proc, line.split(" at ")[1].split()[0], root)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)


def test_the_identity_keeps_performance_settings_and_no_secret(deployment: Deployment) -> None:
    identity = identify_server(deployment.url)
    assert identity.pid == deployment.proc.pid
    text = json.dumps(to_json(identity))
    assert leaked(text) == []
    env = identity.env()
    assert env["NCCL_PROTO"] == "LL" and env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    # Unknown names under a tuning prefix are present, their values withheld.
    assert env["VLLM_S3_URL"] == WITHHELD and env["TORCH_HUB_URL"] == WITHHELD
    for name in ("SGLANG_DB_PASS", "VLLM_HF_PAT", "NCCL_IB_PASSPHRASE", "HF_TOKEN"):
        assert name not in env
    cmd = list(identity.cmdline)
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "8"
    assert '"num_speculative_tokens": 3' in cmd[cmd.index("--speculative-config") + 1]
    assert "postgres://admin:…@db/x" in cmd and "https://user:…@host/m" in cmd
    assert cmd[cmd.index("-k") + 1] == WITHHELD


def test_bench_snapshot_holds_no_secret(deployment: Deployment) -> None:
    from specwatch.commands.bench import run_bench

    out_dir = deployment.root / "snapshots"
    argv = ["--url", deployment.url, "-n", "1", "--warmup", "0", "--max-tokens", "8", "--no-gpu"]
    out, err = io.StringIO(), io.StringIO()
    status = run_bench(
        bench_args([*argv, "--out", str(out_dir)]),
        argv=["specwatch", "bench", *argv],
        stdout=out,
        stderr=err,
    )
    assert status == 0, err.getvalue()
    assert leaked(out.getvalue() + err.getvalue()) == []
    [path] = list(out_dir.glob("*.json"))
    assert leaked(path.read_text()) == []
    raw = read_snapshot(path)
    assert raw["server"]["process"]["environment"]["NCCL_PROTO"] == "LL"
    assert "--tensor-parallel-size" in raw["server"]["process"]["cmdline"]


def test_probe_json_and_text_hold_no_secret(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["probe", deployment.url, "--json", "--max-tokens", "8"]) == 0
    printed = capsys.readouterr()
    assert leaked(printed.out + printed.err) == []
    doc = json.loads(printed.out)
    assert doc["server"]["process"]["environment"]["NCCL_PROTO"] == "LL"
    assert main(["probe", deployment.url, "--max-tokens", "8"]) == 0
    printed = capsys.readouterr()
    assert leaked(printed.out + printed.err) == []


def _stored_payloads(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT z, data FROM events").fetchall()
        meta = conn.execute("SELECT value FROM meta").fetchall()
    parts = [zlib.decompress(data) if z else bytes(data) for z, data in rows]
    return b"\n".join(parts).decode("utf-8", "replace") + str(meta)


def test_a_recording_stores_no_secret(deployment: Deployment) -> None:
    out = deployment.root / "rec.sqlite"
    RECORD_FOR = ["--duration", "3s", "-o", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "specwatch", "record", "--url", deployment.url, *RECORD_FOR],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert leaked(done.stdout + done.stderr) == []
    stored = _stored_payloads(out)
    assert "ServerIdentified" not in stored  # payloads only; the kind is its own column
    assert '"NCCL_PROTO"' in stored  # the identity was recorded ...
    assert leaked(stored) == []  # ... without a secret


# --- files written before the rule ----------------------------------------------------------


OLD_CMDLINE = ("python", "-m", "vllm", *SECRET_ARGS, *PERF_ARGS)


def _old_identity() -> dict[str, Any]:
    """An identity as an older specwatch wrote it: raw, before the rule."""
    data = to_json(ServerIdentity(pid=7))
    data["cmdline"] = list(OLD_CMDLINE)
    data["environment"] = {**SECRET_ENV, **PERF_ENV}
    data["notes"] = [f"process 8 sets VLLM_S3_URL={SECRET_ENV['VLLM_S3_URL']} (recorded: x)"]
    return data


def test_an_old_snapshot_reads_withheld_and_scrub_rewrites_it(tmp_path: Path) -> None:
    story = Path(__file__).parent / "data" / "snapshot-v2.json"
    doc = orjson.loads(story.read_bytes())
    doc["schema_version"] = 3
    doc["server"]["process"] = _old_identity()
    doc["server"]["process_note"] = None
    doc["server"]["launch_args"] = {"tp_size": 8, "db_password": "s3cr3t-db-pass-0001"}
    doc["command"] = ["specwatch", "bench", "--dcgm", "http://u:s3cr3t-dcgm-0009@n:9400"]
    path = tmp_path / "old.json"
    path.write_bytes(orjson.dumps(doc))
    assert leaked(json.dumps(read_snapshot(path))) == []
    assert "s3cr3t-dcgm-0009" not in json.dumps(read_snapshot(path))
    snap = load_snapshot(path)
    assert snap.server.process is not None
    assert snap.server.process.env()["NCCL_PROTO"] == "LL"
    assert leaked(repr(snap)) == []
    assert scrub_file(path) is True
    assert leaked(path.read_text()) == [] and "s3cr3t" not in path.read_text()
    assert scrub_file(path) is False
    assert read_snapshot(path)["server"]["launch_args"]["tp_size"] == 8


def test_an_old_recording_decodes_withheld() -> None:
    identity = ServerIdentity(
        pid=7,
        cmdline=OLD_CMDLINE,
        environment=tuple(sorted({**SECRET_ENV, **PERF_ENV}.items())),
    )
    info = ServerInfo(
        "http://h:8000",
        Dialect.SGLANG,
        "0.5.23",
        "m",
        launch_args={"api_key": "s3cr3t-api-0109", "tp_size": 8},
    )
    for event in (ev.ServerIdentified(1.0, identity), ev.ServerReady(0.0, info)):
        kind, payload, z = codec.encode(event)
        back = codec.decode(kind, payload, z)
        assert leaked(repr(back)) == []
    assert from_json(to_json(identity)).env()["NCCL_PROTO"] == "LL"


# --- the rule ---------------------------------------------------------------------------------

_word = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6)
_option_names = st.tuples(
    st.one_of(st.just(""), _word),
    st.sampled_from(SECRET_WORDS),
    st.one_of(st.just(""), _word),
    st.sampled_from(["-", "_"]),
)
_value = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=8, max_size=20).map(
    lambda s: "Q" + s
)


@given(parts=_option_names, value=_value, form=st.sampled_from(["space", "equals"]))
def test_any_secret_named_option_loses_its_value(
    parts: tuple[str, str, str, str], value: str, form: str
) -> None:
    pre, marker, post, sep = parts
    word = marker + post
    assume(word not in HARMLESS_WORDS)
    name = f"{pre}{sep}{word}" if pre else word
    assert is_secret_name(name)
    argv = ["serve", f"--{name}", value, "--tp", "8"]
    if form == "equals":
        argv = ["serve", f"--{name}={value}", "--tp", "8"]
    shown = redact_argv(argv)
    assert value not in " ".join(shown)
    assert shown[-2:] == ("--tp", "8")
    assert redact_value({name: value, "n": 3}) == {name: WITHHELD, "n": 3}
    assert value not in redact_text(f'{{"{name}": "{value}"}}')
    assert value not in redact_text(f"{name}={value}")


@given(
    scheme=st.sampled_from(["http", "https", "s3", "postgres", "redis", "git+ssh"]),
    user=st.text("abcdefgh", min_size=1, max_size=8),
    password=_value,
    host=st.text("abcdefgh", min_size=1, max_size=8),
)
def test_any_url_loses_its_password(scheme: str, user: str, password: str, host: str) -> None:
    url = f"{scheme}://{user}:{password}@{host}/x"
    for shown in (redact_text(url), redact_argv(["--model", url])[1], redact_text(f"at {url}.")):
        assert password not in shown
        assert f"{scheme}://{user}:…@{host}/x" in shown


def test_performance_options_keep_their_values() -> None:
    argv = [
        "--max-num-batched-tokens",
        "8192",
        "--num-speculative-tokens",
        "3",
        "--model-path",
        "/models/llama",
        "--tokenizer",
        "meta/llama",
        "--enable-auth",
        "--port",
        "8000",
    ]
    assert redact_argv(argv) == tuple(argv)
