"""The launch configuration, normalised from each engine's real shapes, and how it compares."""

from __future__ import annotations

import json

import pytest

from specwatch.core.config_differences import config_differences, differences_text
from specwatch.core.identity import ServerIdentity
from specwatch.core.launch_config import (
    SPEC_OFF,
    launch_config,
    parse_command_line,
    server_launch_config,
)
from specwatch.core.redaction import redact_argv
from specwatch.core.server import Dialect, ServerInfo, SpecConfig
from specwatch.sources.detect import detect
from specwatch.sources.dialects.llamacpp import llamacpp_launch_facts
from specwatch.sources.dialects.vllm import vllm_cache_config
from specwatch.sources.metrics.parse import parse_metrics
from tests.conftest import running_sim

# As shared/tools/llama-server/start-llama-server.sh starts it (b1-0c1e570).
LLAMA = [
    "/root/.cache/specwatch-realserver/bin/llama-server",
    *("-m", "/m/tiny-target.gguf", "--host", "127.0.0.1", "--port", "8080"),
    *("--metrics", "--slots", "--props", "-t", "2", "-c", "4096", "-np", "1"),
    *("--alias", "tiny-target", "--no-webui"),
]
LLAMA_DRAFT = [
    *LLAMA,
    *("-md", "/m/tiny-draft.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "4"),
    *("--spec-draft-n-min", "0", "--spec-draft-p-min", "0.75", "-td", "2"),
]
# What a fresh llama-server's /slots says: speculating, no type until a request ran.
FRESH_SLOTS = SpecConfig(enabled=True, source="/slots")
WARM_SLOTS = SpecConfig(enabled=True, algorithm="draft-simple", source="/slots")


def _settings(cfg: object) -> dict[str, str | None]:
    return {s.name: s.value for s in cfg.settings}  # type: ignore[attr-defined]


def test_llama_server_command_line_normalised() -> None:
    cfg = launch_config("llamacpp", LLAMA_DRAFT, None, FRESH_SLOTS)
    assert cfg.source == "command line"
    assert _settings(cfg) == {
        "speculative method": "draft-simple",
        "draft length": "4",
        "model": "/m/tiny-target.gguf",
        "draft model": "/m/tiny-draft.gguf",
        "max batch": "1",
        "context length": "4096",
    }
    others = {s.name: s.value for s in cfg.arguments}
    # short options under their long names; flags "on"; every other argument kept
    assert others["--threads"] == "2" and others["--threads-draft"] == "2"
    assert others["--metrics"] == "on" and others["--spec-draft-p-min"] == "0.75"
    assert "-md" not in others and "--spec-draft-n-max" not in others


def test_the_draft_type_comes_from_the_command_line_until_slots_names_it() -> None:
    md_only = [a for a in LLAMA_DRAFT if a not in ("--spec-type", "draft-simple")]
    fresh = launch_config("llamacpp", md_only, None, FRESH_SLOTS)
    warm = launch_config("llamacpp", md_only, None, WARM_SLOTS)
    assert fresh.value("speculative method") == warm.value("speculative method") == "draft-simple"
    for cfg in (fresh, warm):  # where the server agrees, the option stays named
        assert {s.origin for s in cfg.settings if s.name == "speculative method"} == {"-md"}
    assert config_differences(warm, fresh) == ()
    eagle = SpecConfig(enabled=True, algorithm="none,draft-eagle3", source="/slots")
    told = launch_config("llamacpp", md_only, None, eagle)
    # where it says otherwise, the server's own word wins
    assert [(s.value, s.origin) for s in told.settings if s.name == "speculative method"] == [
        ("draft-eagle3", "/slots")
    ]


def test_draft_length_change_names_the_argument() -> None:
    four = launch_config("llamacpp", LLAMA_DRAFT, None, WARM_SLOTS)
    eight_argv = [a if a != "4" else "8" for a in LLAMA_DRAFT]
    eight = launch_config("llamacpp", eight_argv, None, FRESH_SLOTS)
    diffs = config_differences(four, eight)
    assert [d.line() for d in diffs] == ["draft length 4 → 8 (--spec-draft-n-max)"]


def test_speculation_off_is_a_change_of_method_and_of_each_draft_argument() -> None:
    draft = launch_config("llamacpp", LLAMA_DRAFT, None, WARM_SLOTS)
    plain = launch_config("llamacpp", LLAMA, None, SpecConfig(enabled=False, source="/slots"))
    assert plain.value("speculative method") == SPEC_OFF
    lines = [d.line() for d in config_differences(draft, plain)]
    assert lines[:3] == [
        "speculative method draft-simple → none (--spec-type)",
        "draft length 4 → — (--spec-draft-n-max)",
        "draft model /m/tiny-draft.gguf → — (-md)",
    ]
    assert set(lines[3:]) == {
        "--spec-draft-n-min 0 → —",
        "--spec-draft-p-min 0.75 → —",
        "--threads-draft 2 → —",
    }
    assert differences_text(config_differences(draft, plain), limit=2).endswith(" and 4 more")


def test_where_it_listens_and_its_secrets_never_count() -> None:
    a = launch_config("llamacpp", [*LLAMA, "--api-key", "sk-one"], None, None)
    b_argv = [a if a != "8080" else "8081" for a in LLAMA] + ["--log-file", "/tmp/x.log"]
    b = launch_config("llamacpp", b_argv, None, None)
    assert config_differences(a, b) == ()
    redacted = launch_config("llamacpp", redact_argv([*LLAMA, "--api-key", "sk-one"]))
    assert "sk-one" not in json.dumps(redacted.to_json())


def test_llama_servers_endpoint_switches_never_count() -> None:
    # restarted with --metrics (as the monitor asks of a server without it): not a new setup
    plain = [a for a in LLAMA if a not in ("--metrics", "--slots", "--props", "--no-webui")]
    a = launch_config("llamacpp", plain, None, None)
    b = launch_config("llamacpp", [*plain, "--metrics", "--slots", "--props", "--no-webui"])
    assert config_differences(a, b) == ()
    c = launch_config("llamacpp", [*plain, "--metrics", "-np", "4"])
    assert [d.name for d in config_differences(a, c)] == ["max batch"]


def test_remote_llama_server_from_props_and_slots_alone() -> None:
    props = {
        "default_generation_settings": {"n_ctx": 4096, "params": {"speculative.types": "none"}},
        "total_slots": 1,
        "model_path": "/m/tiny-target.gguf",
        "build_info": "b1-0c1e570",
    }
    slots = [{"id": 0, "speculative": True, "params": {"speculative.n_max": 16}}]
    facts = llamacpp_launch_facts(props, slots)
    assert facts == {
        "model_path": "/m/tiny-target.gguf",
        "total_slots": 1,
        "n_ctx": 4096,
        "speculative.n_max": 16,
    }
    fresh = launch_config("llamacpp", (), facts, FRESH_SLOTS)
    assert fresh.source is None and fresh.value("speculative method") is None
    more = launch_config("llamacpp", (), {**facts, "total_slots": 4}, WARM_SLOTS)
    # the unknown type on one side is no change; what both report is compared
    assert [d.line() for d in config_differences(fresh, more)] == ["/props total_slots 1 → 4"]
    off = launch_config("llamacpp", (), facts, SpecConfig(enabled=False, source="/slots"))
    assert next(d.name for d in config_differences(more, off)) == "speculative method"


VLLM_SC = (
    '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",'
    ' "num_speculative_tokens": 4}'
)


def test_vllm_serve_with_a_speculative_config() -> None:
    argv = ["/venv/bin/python3", "/venv/bin/vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    argv += ["-tp", "2", "--speculative-config", VLLM_SC, "--max_num_seqs", "64"]
    argv += ["--enforce-eager", "--dtype", "bfloat16", "--port", "8000"]
    cfg = launch_config("vllm", argv, None, SpecConfig(enabled=True, num_draft_tokens=4))
    assert _settings(cfg) == {
        "speculative method": "eagle3",
        "draft length": "4",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "draft model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "tensor parallel": "2",
        "dtype": "bfloat16",
        "max batch": "64",
        "CUDA graphs": "off",
    }
    two = [a.replace('"num_speculative_tokens": 4', '"num_speculative_tokens": 2') for a in argv]
    lines = [d.line() for d in config_differences(cfg, launch_config("vllm", two))]
    assert lines == ["draft length 4 → 2 (--speculative-config)"]
    module = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "-tp", "2"]
    assert _settings(launch_config("vllm", module)) == {
        "speculative method": "none",
        "model": "m",
        "tensor parallel": "2",
    }


def test_vllm_cache_config_info_is_reported_configuration() -> None:
    scrape = parse_metrics(
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",'
        'engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="27186",'
        'kv_cache_size_tokens="434976",kv_cache_max_concurrency="13.27",'
        'num_cpu_blocks="None"} 1.0\n'
    )
    labels = vllm_cache_config(scrape)
    assert labels["cache_dtype"] == "auto" and "engine" not in labels
    a = launch_config("vllm", (), labels, SpecConfig(enabled=False))
    found = {"num_gpu_blocks": "27001", "kv_cache_size_tokens": "432016"}
    found["kv_cache_max_concurrency"] = "13.18"
    b = launch_config("vllm", (), {**labels, **found, "block_size": "32"}, None)
    # the blocks vLLM's memory profiling found, and what it derives from them (vLLM 0.32's
    # cache_config_info has every CacheConfig field), differ between any two starts
    assert [d.line() for d in config_differences(a, b)] == ["cache_config block_size 16 → 32"]


async def test_sglang_server_info_from_the_simulator() -> None:
    with running_sim("sglang", "0.5.23") as sim:
        async with sim.client() as client:
            info = await detect(client)
    cfg = server_launch_config(info)
    assert cfg is not None and cfg.source == "/server_info"
    settings = _settings(cfg)
    sim_cfg = sim.world.config
    assert settings["speculative method"] == sim_cfg.spec_algorithm
    assert settings["draft length"] == str(sim_cfg.num_steps)
    assert settings["draft tokens per step"] == str(sim_cfg.num_draft_tokens)
    assert settings["tensor parallel"] == str(sim_cfg.tp_size)
    assert settings["CUDA graphs"] == "on"  # disable_decode_cuda_graph: false
    assert "launch_command" in {s.name for s in cfg.arguments}
    restarted = {**dict(info.launch_args or {}), "speculative_num_steps": 5, "port": 1}
    # the scheduler's KV tokens, found by memory profiling, differ between two starts
    restarted["max_total_num_tokens"] = int(restarted["max_total_num_tokens"]) - 37
    other = launch_config("sglang", (), restarted, info.spec)
    assert [d.line() for d in config_differences(cfg, other)] == [
        f"draft length {sim_cfg.num_steps} → 5 (speculative_num_steps)"
    ]


async def test_llama_sim_detect_records_props_facts() -> None:
    with running_sim("llamacpp") as sim:
        async with sim.client() as client:
            info = await detect(client)
    assert info.launch_args is not None
    assert info.launch_args["total_slots"] == sim.world.config.max_running
    assert info.launch_args["n_ctx"] == sim.world.config.max_model_len


def test_a_snapshot_side_without_a_command_line_compares_only_what_both_know() -> None:
    local = ServerIdentity(pid=42, cmdline=tuple(LLAMA_DRAFT))
    info = ServerInfo("http://h:1", Dialect.LLAMACPP, spec=WARM_SLOTS)
    with_cmd = server_launch_config(info, local)
    remote = server_launch_config(info, ServerIdentity(notes=("remote server",)))
    assert with_cmd is not None and remote is not None and remote.source is None
    assert config_differences(with_cmd, remote) == ()


@pytest.mark.parametrize(
    ("argv", "options"),
    [
        (["llama-server", "--seed", "-1", "-fa"], [("--seed", "-1"), ("-fa", None)]),
        (["python3", "-u", "-m", "sglang.launch_server", "--tp=2"], [("--tp", "2")]),
        (["/bin/srv", "--x", "--y", "v"], [("--x", None), ("--y", "v")]),
    ],
)
def test_command_line_parsing(argv: list[str], options: list[tuple[str, str | None]]) -> None:
    assert parse_command_line(argv)[1] == options
