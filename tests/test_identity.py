"""Code identity, pure: the environment allow-list, JSON round trip and the comparison."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from specwatch.core.identity import (
    Checkout,
    LoadedLibrary,
    ServerIdentity,
    build_commit,
    from_json,
    identity_differences,
    to_json,
    with_build_info,
)
from specwatch.core.redaction import redact_argv
from specwatch.core.server_env import env_allowed, filter_environment, merge_environments
from specwatch.sources.identity.code_origin import loaded_libraries, python_entry

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _identity(**env: str) -> ServerIdentity:
    return ServerIdentity(
        pid=42,
        package="sglang",
        package_version="0.5.2",
        checkout=Checkout(path="/src/sglang", commit=COMMIT, dirty=False),
        environment=filter_environment(env),
        libraries=(LoadedLibrary("nccl", "2.27.5", "/x/libnccl.so.2"),),
    )


def test_allow_list_keeps_tuning_variables_and_drops_secrets() -> None:
    env = {
        "NCCL_PROTO": "LL",
        "NCCL_ALGO": "Ring",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "LD_PRELOAD": "/opt/libnccl.so",
        "LD_LIBRARY_PATH": "/opt/lib",
        "SGLANG_ENABLE_TORCH_COMPILE": "1",
        "NCCL_AUTH_TOKEN": "decoy",
        "VLLM_API_KEY": "decoy",
        "TORCH_SECRET": "decoy",
        "NVIDIA_password": "decoy",
        "CUDA_CREDENTIALS": "decoy",
        "HF_TOKEN": "decoy",
        "HOME": "/root",
        "PATH": "/bin",
        "LD_DEBUG": "all",
    }
    kept = dict(filter_environment(env))
    assert kept == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "LD_LIBRARY_PATH": "/opt/lib",
        "LD_PRELOAD": "/opt/libnccl.so",
        "NCCL_ALGO": "Ring",
        "NCCL_PROTO": "LL",
        "SGLANG_ENABLE_TORCH_COMPILE": "1",
    }
    assert not env_allowed("OMP_AUTHORITY")
    assert env_allowed("OMP_NUM_THREADS")


def test_long_values_are_cut() -> None:
    ((name, value),) = filter_environment({"LD_LIBRARY_PATH": "x" * 10_000})
    assert name == "LD_LIBRARY_PATH" and len(value) == 4096 and value.endswith("…")


def test_json_round_trip_and_tolerance() -> None:
    identity = _identity(NCCL_PROTO="LL")
    assert from_json(to_json(identity)) == identity
    assert from_json({}) == ServerIdentity()
    assert from_json("nonsense") == ServerIdentity()
    odd = from_json({"pid": "x", "checkout": {"path": "/p", "dirty": "yes"}, "cmdline": [1, "a"]})
    assert odd.pid is None and odd.checkout == Checkout(path="/p") and odd.cmdline == ("a",)


def test_a_hand_edited_snapshot_cannot_carry_a_secret() -> None:
    data = to_json(_identity())
    data["environment"] = {"NCCL_AUTH_TOKEN": "hunter2", "NCCL_PROTO": "LL"}
    assert from_json(data).env() == {"NCCL_PROTO": "LL"}


def test_identical_identities_are_same_code_and_libraries() -> None:
    result = identity_differences(_identity(NCCL_PROTO="LL"), _identity(NCCL_PROTO="LL"))
    assert result.same_code_and_libraries
    assert result.lines() == []


def test_differing_only_in_nccl_proto_names_that_variable() -> None:
    result = identity_differences(_identity(NCCL_PROTO="LL"), _identity(NCCL_PROTO="Simple"))
    assert not result.same_code_and_libraries
    assert result.lines() == ["NCCL_PROTO: LL -> Simple"]


def test_a_variable_set_on_one_side_only() -> None:
    result = identity_differences(_identity(), _identity(NCCL_ALGO="Ring"))
    assert result.lines() == ["NCCL_ALGO: (unset) -> Ring"]


def test_commit_dirty_and_nccl_differences_are_named() -> None:
    a = _identity()
    b = ServerIdentity(
        package="sglang",
        package_version="0.5.2",
        checkout=Checkout(path="/src/sglang", commit="f" * 40, dirty=True),
        libraries=(LoadedLibrary("nccl", "2.21.5", "/y/libnccl.so.2"),),
    )
    result = identity_differences(a, b)
    assert result.lines()[:3] == [
        f"commit: {COMMIT} -> {'f' * 40}",
        "uncommitted changes: no -> yes",
        "NCCL: 2.27.5 -> 2.21.5",
    ]
    assert "after: the checkout has uncommitted changes" in result.caveats


def test_unknown_code_is_never_called_the_same() -> None:
    result = identity_differences(ServerIdentity(), ServerIdentity())
    assert result.differences == ()
    assert not result.same_code_and_libraries
    assert result.caveats == ("code identity unknown on at least one side",)


def test_a_checkout_changed_after_start_is_a_caveat() -> None:
    a = _identity()
    b = replace(a, warnings=("HEAD moved after the server started",))
    result = identity_differences(a, b)
    assert result.differences == ()
    assert not result.same_code_and_libraries
    assert result.caveats == ("after: HEAD moved after the server started",)


def test_native_build_id() -> None:
    assert build_commit("b6500-0c1e570") == "0c1e570"
    assert build_commit("b1-deadbeef1") == "deadbeef1"
    assert build_commit("unknown") is None
    identity = with_build_info(ServerIdentity(), "b6500-0c1e570")
    assert identity.build == "b6500-0c1e570" and identity.short_commit == "0c1e570"
    other = with_build_info(ServerIdentity(), "b6501-1d2f681")
    lines = identity_differences(identity, other).lines()
    assert "commit: 0c1e570 -> 1d2f681" in lines
    assert "build: b6500-0c1e570 -> b6501-1d2f681" in lines


def test_children_environments_merge_with_a_note_on_conflict() -> None:
    env, notes = merge_environments(
        [
            (1, {"NCCL_PROTO": "LL", "HF_TOKEN": "x"}),
            (2, {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"}),
        ]
    )
    assert env == (("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "LL"))
    assert notes == ("process 2 sets NCCL_PROTO=Simple (recorded: LL)",)


def test_library_versions_from_wheel_metadata_and_file_names(tmp_path: Path) -> None:
    site = tmp_path / "lib/python3.11/site-packages"
    nccl = site / "nvidia/nccl/lib/libnccl.so.2"
    nccl.parent.mkdir(parents=True)
    nccl.write_bytes(b"")
    info = site / "nvidia_nccl_cu12-2.27.5.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("nvidia/nccl/lib/libnccl.so.2,sha256=x,1\n")
    torch = site / "torch/lib/libtorch_cuda.so"
    torch.parent.mkdir(parents=True)
    (site / "torch-2.8.0+cu128.dist-info").mkdir()
    libs = loaded_libraries(
        [
            str(nccl),
            str(torch),
            "/opt/conda/lib/libcudart.so.12.4.127",
            "/usr/lib/libcudnn.so.9",
            "/usr/lib/libnccl-net.so",
            "/usr/lib/libc.so.6",
        ]
    )
    assert [(lib.kind, lib.version) for lib in libs] == [
        ("nccl", "2.27.5"),
        ("cudart", "12.4.127"),
        ("cudnn", None),
        ("torch", "2.8.0+cu128"),
    ]
    identity = ServerIdentity(libraries=libs)
    assert identity.library("nccl") == "2.27.5" and identity.library("cudnn") is None


def test_python_entry_from_command_lines() -> None:
    assert python_entry(["python3", "-u", "-m", "sglang.launch_server", "--port", "1"]) is not None
    entry = python_entry(["python3", "-u", "-m", "sglang.launch_server"])
    assert entry is not None and entry.module == "sglang.launch_server"
    entry = python_entry(["/v/bin/python", "-X", "dev", "/v/bin/vllm", "serve", "m"])
    assert entry is not None and entry.script == "/v/bin/vllm"
    assert python_entry(["/opt/llama.cpp/build/bin/llama-server", "-m", "x.gguf"]) is None


def test_command_line_secrets_are_hidden() -> None:
    argv = [
        "python",
        "-m",
        "sglang.launch_server",
        "--api-key",
        "sk-1",
        "--hf-token=hf_2",
        "--tp",
        "8",
    ]
    assert redact_argv(argv) == (
        "python", "-m", "sglang.launch_server", "--api-key", "***", "--hf-token=***", "--tp", "8",
    )  # fmt: skip
