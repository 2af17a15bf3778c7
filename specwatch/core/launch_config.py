"""A server's launch configuration, normalised to what decides its speed.

Built from what a snapshot, a recording or a live session already holds: the server process's
command line (a server on this machine, :class:`~specwatch.core.identity.ServerIdentity`),
SGLang's ``/server_info`` arguments, and what a server reports beside them (llama.cpp's
``/props``, vLLM's ``vllm:cache_config_info`` labels, the speculative setup of ``/slots`` or the
``spec_decode`` series: :class:`~specwatch.core.server.SpecConfig`). The settings that matter
(:data:`SETTINGS`: speculative method, draft length, model and draft model, parallelism, dtype,
batch and CUDA-graph settings) get one name across engines and aliases (``-md``,
``--model-draft`` and ``--spec-draft-model`` are one draft model); every other argument is kept
as it was given. Values arrive redacted (:func:`~specwatch.core.redaction.redact_argv` runs where
a command line or launch arguments enter), so nothing here can show a secret.

:func:`~specwatch.core.config_differences.config_differences` compares two of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from specwatch.core.server import SpecConfig

if TYPE_CHECKING:
    from specwatch.core.identity import ServerIdentity
    from specwatch.core.server import ServerInfo
    from specwatch.core.snapshot_records import SnapshotServer

SPEC_METHOD = "speculative method"
DRAFT_LENGTH = "draft length"
CONTEXT_LENGTH = "context length"
SETTINGS = (
    SPEC_METHOD,
    DRAFT_LENGTH,
    "draft tokens per step",
    "draft top-k",
    "model",
    "draft model",
    "tensor parallel",
    "pipeline parallel",
    "data parallel",
    "dtype",
    "quantization",
    "KV cache dtype",
    "max batch",
    "batch tokens",
    "CUDA graphs",
    "CUDA graph max batch",
    CONTEXT_LENGTH,
)
"""The normalised settings, in the order compare shows them."""
SPEC_OFF = "none"
"""The speculative method of a server that does not speculate."""
COMMAND_LINE = "command line"
REPORTED_ARGV = "argv"
"""The ``launch_args`` key of a command line the server reports itself (a llama-server
router's ``/v1/models`` ``status.args`` of the model watched): it wins over the process's,
which is the router's own."""
MAX_VALUE = 200
"""Longest value kept (a JSON ``--speculative-config`` is shown whole below this)."""

_LLAMA: dict[str, tuple[str, ...]] = {
    SPEC_METHOD: ("--spec-type",),
    DRAFT_LENGTH: ("--spec-draft-n-max", "--draft-max", "--draft", "--draft-n"),
    "model": ("--model", "-m", "--hf-repo", "-hf", "-hfr"),
    "draft model": ("--spec-draft-model", "-md", "--model-draft"),
    "KV cache dtype": ("--cache-type-k", "-ctk"),
    "max batch": ("--parallel", "-np"),
    "batch tokens": ("--batch-size", "-b"),
    CONTEXT_LENGTH: ("--ctx-size", "-c"),
}
_LLAMA_ALIASES = {
    "-t": "--threads",
    "-tb": "--threads-batch",
    "-td": "--threads-draft",
    "-tbd": "--threads-batch-draft",
    "-ngl": "--n-gpu-layers",
    "--gpu-layers": "--n-gpu-layers",
    "-ngld": "--n-gpu-layers-draft",
    "--gpu-layers-draft": "--n-gpu-layers-draft",
    "-ub": "--ubatch-size",
    "-fa": "--flash-attn",
    "-ctv": "--cache-type-v",
    "-cd": "--ctx-size-draft",
    "-sm": "--split-mode",
    "-ts": "--tensor-split",
    "-mg": "--main-gpu",
    "-dev": "--device",
    "-devd": "--device-draft",
    "-a": "--alias",
    "-s": "--seed",
    "-n": "--n-predict",
    "--predict": "--n-predict",
    "--draft-min": "--spec-draft-n-min",
    "--draft-p-min": "--spec-draft-p-min",
}
_VLLM: dict[str, tuple[str, ...]] = {
    "model": ("--model",),
    "tensor parallel": ("--tensor-parallel-size", "-tp"),
    "pipeline parallel": ("--pipeline-parallel-size", "-pp"),
    "data parallel": ("--data-parallel-size", "-dp"),
    "dtype": ("--dtype",),
    "quantization": ("--quantization", "-q"),
    "KV cache dtype": ("--kv-cache-dtype",),
    "max batch": ("--max-num-seqs",),
    "batch tokens": ("--max-num-batched-tokens",),
    "CUDA graphs": ("--enforce-eager",),
    CONTEXT_LENGTH: ("--max-model-len",),
}
_VLLM_ALIASES = {"-O": "--compilation-config", "-sc": "--speculative-config"}
_SGLANG: dict[str, tuple[str, ...]] = {
    SPEC_METHOD: ("--speculative-algorithm",),
    DRAFT_LENGTH: ("--speculative-num-steps",),
    "draft tokens per step": ("--speculative-num-draft-tokens",),
    "draft top-k": ("--speculative-eagle-topk",),
    "model": ("--model-path", "--model"),
    "draft model": ("--speculative-draft-model-path", "--speculative-draft-model"),
    "tensor parallel": ("--tp-size", "--tp"),
    "pipeline parallel": ("--pp-size", "--pp"),
    "data parallel": ("--dp-size", "--dp"),
    "dtype": ("--dtype",),
    "quantization": ("--quantization",),
    "KV cache dtype": ("--kv-cache-dtype",),
    "max batch": ("--max-running-requests",),
    "batch tokens": ("--chunked-prefill-size",),
    "CUDA graphs": ("--disable-cuda-graph", "--disable-decode-cuda-graph"),
    "CUDA graph max batch": ("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),
    CONTEXT_LENGTH: ("--context-length",),
}
_TABLES = {"llamacpp": _LLAMA, "vllm": _VLLM, "sglang": _SGLANG}
_ALIASES = {"llamacpp": _LLAMA_ALIASES, "vllm": _VLLM_ALIASES, "sglang": {}}
_DISABLING = frozenset({"--enforce-eager", "--disable-cuda-graph", "--disable-decode-cuda-graph"})
"""Flags whose presence turns CUDA graphs off."""

IGNORED = frozenset(
    {
        "--host",
        "--port",
        "--api-key",
        "--api-key-file",
        "--alias",
        "--served-model-name",
        "--ssl-keyfile",
        "--ssl-certfile",
        "--ssl-key-file",
        "--ssl-cert-file",
        "--log-file",
        "--log-level",
        "--log-disable",
        "--log-colors",
        "--log-prefix",
        "--log-timestamps",
        "--log-verbosity",
        "--log-requests",
        "--uvicorn-log-level",
        "--disable-log-requests",
        "--enable-log-requests",
        "--verbose",
        "-v",
        "--random-seed",
        "--startup-time",
        "--pid",
        "--nccl-port",
        "--dist-init-addr",
        "--launch-command",
        "--version",
        "--frontend",
        "--status",
        "--engine",
        # llama-server's endpoints: its counters and slots are kept either way
        "--metrics",
        "--slots",
        "--no-slots",
        "--props",
        "--ui",
        "--webui",
        "--no-ui",
        "--no-webui",
        "num_gpu_blocks",
        "num_cpu_blocks",
        "kv_cache_size_tokens",
        "kv_cache_max_concurrency",
        # SGLang's scheduler info beside its arguments in /server_info, from the same profiling
        "--max-total-num-tokens",
        "--max-req-input-len",
        "engine",
    }
)
"""Arguments that differ between two starts of the same setup (where it listens, its logs, its
secrets, a seed drawn at start, what vLLM's memory profiling found, which of llama-server's
endpoints it serves): listed, never a change."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting or argument and where it came from."""

    name: str
    """A :data:`SETTINGS` name, an option as given (``--threads``) or a reported key."""
    value: str | None
    """``None``: not given (the engine's default)."""
    origin: str
    """The option or key that gave it (``--spec-draft-n-max``, ``/slots``)."""


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """What a server was started with, as far as anything recorded says."""

    engine: str | None
    source: str | None
    """Where the arguments came from (``"command line"``, ``"/server_info"``); ``None`` when
    no argument list was recorded (then an unset setting is unknown, not the default)."""
    settings: tuple[Setting, ...]
    """One per :data:`SETTINGS` name that is known, in that order."""
    arguments: tuple[Setting, ...] = ()
    """Every other argument, in the order given."""
    reported: tuple[Setting, ...] = ()
    """What the server reports beside its arguments (``/props``, ``vllm:cache_config_info``)."""

    def value(self, name: str) -> str | None:
        """A setting's value, ``None`` when unset or unknown."""
        return next((s.value for s in self.settings if s.name == name), None)

    @property
    def known(self) -> bool:
        """Whether anything is known about the configuration."""
        return bool(self.source or self.settings or self.reported)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (``compare --json``)."""
        return {
            "engine": self.engine,
            "source": self.source,
            "settings": {s.name: {"value": s.value, "origin": s.origin} for s in self.settings},
            "arguments": {s.name: s.value for s in self.arguments},
            "reported": {s.name: s.value for s in self.reported},
        }


# --- reading ---------------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (Mapping, list, tuple)):
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    else:
        text = str(value)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def _is_option(arg: str) -> bool:
    return arg.startswith("-") and len(arg) > 1 and not arg[1:2].isdigit() and arg[1:2] != "."


def _program_start(argv: Sequence[str]) -> int:
    """Index of the program's first argument: past ``python [-opts] -m module`` or a script."""
    i = 1
    if os.path.basename(argv[0]).startswith("python"):
        while i < len(argv) and _is_option(argv[i]):
            if argv[i] == "-m":
                return i + 2
            i += 2 if argv[i] in ("-X", "-W") else 1
        return i + 1
    return i


def engine_of(argv: Sequence[str]) -> str | None:
    """The engine a command line starts (``llama-server``, ``vllm serve``, SGLang), if any."""
    if not argv:
        return None
    if "llama-server" in os.path.basename(argv[0]):
        return "llamacpp"
    head = " ".join(argv[:4]).lower()
    if "sglang" in head:
        return "sglang"
    if "vllm" in head:
        return "vllm"
    return None


def parse_command_line(
    argv: Sequence[str], aliases: Mapping[str, str] | None = None, *, dashes: bool = False
) -> tuple[list[str], list[tuple[str, str | None]]]:
    """``(positional arguments, options)`` of a server's command line.

    ``--opt=value`` and ``--opt value`` forms; an option followed by another option (or
    nothing) is a flag (value ``None``). ``aliases`` maps short names to long ones; ``dashes``
    treats ``--max_num_seqs`` as ``--max-num-seqs`` (Python servers accept both).
    """
    if not argv:
        return [], []
    args = list(argv[_program_start(argv) :])
    if args and args[0] == "serve":  # vllm serve MODEL
        args = args[1:]
    positional: list[str] = []
    options: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not _is_option(arg) or arg == "--":
            positional.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if not eq:
            if i < len(args) and not _is_option(args[i]):
                value = args[i]
                i += 1
            else:
                value = None  # type: ignore[assignment]
        if dashes and name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        options.append(((aliases or {}).get(name, name), value))
    return positional, options


def _from_options(
    engine: str | None, options: Iterable[tuple[str, Any]]
) -> tuple[dict[str, Setting], list[Setting]]:
    """The normalised settings and the other arguments of ``(option, value)`` pairs."""
    table = _TABLES.get(engine or "", {})
    owner = {alias: name for name, aliases in table.items() for alias in aliases}
    settings: dict[str, Setting] = {}
    others: dict[str, Setting] = {}
    for option, raw in options:
        value = _text(raw)
        name = owner.get(option)
        if name is None:
            others[option] = Setting(option, "on" if value is None else value, option)
            continue
        if option in _DISABLING:
            on = value is None or value.lower() in ("on", "true", "1", "yes")
            value = "off" if on else "on"
        settings[name] = Setting(name, value, option)
    return settings, list(others.values())


def _vllm_speculative(options: list[tuple[str, str | None]]) -> dict[str, Setting]:
    """vLLM's ``--speculative-config`` JSON (or its dotted keys, or the old flags)."""
    found: dict[str, tuple[Any, str]] = {}
    for option, value in options:
        if option == "--speculative-config" and value:
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if isinstance(parsed, Mapping):
                for key, item in parsed.items():
                    found[str(key)] = (item, option)
        elif option.startswith("--speculative-config."):
            found[option.split(".", 1)[1].replace("-", "_")] = (value, option)
        elif option == "--speculative-model":
            found["model"] = (value, option)
        elif option == "--num-speculative-tokens":
            found["num_speculative_tokens"] = (value, option)
    out: dict[str, Setting] = {}
    if not found:
        out[SPEC_METHOD] = Setting(SPEC_METHOD, SPEC_OFF, "--speculative-config")
        return out
    method, where = found.get("method", (None, "--speculative-config"))
    if method is None and "model" in found:
        method = "draft_model"
    out[SPEC_METHOD] = Setting(SPEC_METHOD, _text(method), where)
    for key, name in (("num_speculative_tokens", DRAFT_LENGTH), ("model", "draft model")):
        if key in found:
            item, where = found[key]
            out[name] = Setting(name, _text(item), where)
    return out


def _command_line(
    engine: str | None, argv: Sequence[str]
) -> tuple[dict[str, Setting], list[Setting]]:
    dashes = engine in ("vllm", "sglang")
    positional, options = parse_command_line(argv, _ALIASES.get(engine or ""), dashes=dashes)
    settings, others = _from_options(engine, options)
    if engine == "vllm":
        others = [s for s in others if not s.name.startswith("--speculative-config")]
        others = [
            s for s in others if s.name not in ("--speculative-model", "--num-speculative-tokens")
        ]
        settings.update(_vllm_speculative(options))
        if "model" not in settings and positional:
            settings["model"] = Setting("model", _text(positional[0]), "positional")
    elif engine == "llamacpp" and SPEC_METHOD not in settings:
        drafting = "draft model" in settings
        settings[SPEC_METHOD] = Setting(
            SPEC_METHOD,
            "draft-simple" if drafting else SPEC_OFF,
            "-md" if drafting else "--spec-type",
        )
    elif engine == "sglang" and SPEC_METHOD not in settings:
        settings[SPEC_METHOD] = Setting(SPEC_METHOD, SPEC_OFF, "--speculative-algorithm")
    return settings, others


def _server_args(
    engine: str | None, args: Mapping[str, Any]
) -> tuple[dict[str, Setting], list[Setting]]:
    """SGLang's ``/server_info``: every resolved argument as a flat key."""
    keyed = {"--" + str(key).replace("_", "-"): str(key) for key in args}
    options = [("--" + str(key).replace("_", "-"), value) for key, value in args.items()]
    settings, others = _from_options(engine, options)
    settings = {n: Setting(n, s.value, keyed.get(s.origin, s.origin)) for n, s in settings.items()}
    others = [
        Setting(keyed.get(s.name, s.name), s.value, keyed.get(s.name, s.name)) for s in others
    ]
    method = settings.get(SPEC_METHOD)
    if method is None or method.value is None or method.value.upper() == SPEC_OFF.upper():
        settings[SPEC_METHOD] = Setting(SPEC_METHOD, SPEC_OFF, "speculative_algorithm")
    return settings, others


def _reported(engine: str | None, args: Mapping[str, Any]) -> list[Setting]:
    prefix = "/props" if engine == "llamacpp" else "cache_config" if engine == "vllm" else ""
    return [
        Setting(f"{prefix} {key}".strip(), _text(value), prefix or str(key))
        for key, value in sorted(args.items())
    ]


def _with_reported_spec(
    engine: str | None, settings: dict[str, Setting], spec: SpecConfig | None
) -> None:
    """Fill the speculative setup from what the server reports (``/slots``, metrics)."""
    if spec is None:
        return
    where = spec.source or "server"
    said = settings.get(SPEC_METHOD)
    if spec.enabled is False:
        method: str | None = SPEC_OFF
    elif spec.algorithm and (engine == "llamacpp" or said is None):
        method = ",".join(_types(spec.algorithm))
    else:
        method = None
    # The arguments keep their word (and name the option) where the server says the same.
    if method is not None and (said is None or said.value != method):
        settings[SPEC_METHOD] = Setting(SPEC_METHOD, method, where)
    length = spec.num_steps if engine == "sglang" else spec.num_draft_tokens
    if DRAFT_LENGTH not in settings and length is not None and spec.enabled is not False:
        settings[DRAFT_LENGTH] = Setting(DRAFT_LENGTH, str(length), where)
    if "draft model" not in settings and spec.draft_model:
        settings["draft model"] = Setting("draft model", _text(spec.draft_model), where)


def _types(algorithm: str) -> list[str]:
    types = [t.strip() for t in algorithm.split(",") if t.strip() and t.strip() != SPEC_OFF]
    return types or [SPEC_OFF]


def server_argv(
    launch_args: Mapping[str, Any] | None, cmdline: Sequence[str] = ()
) -> tuple[str, ...]:
    """The server's command line: the one it reports (:data:`REPORTED_ARGV` in its
    ``launch_args``: a llama-server router's for the model watched) where it reports one, else
    ``cmdline``, its process's (empty when not read)."""
    argv = (launch_args or {}).get(REPORTED_ARGV)
    if isinstance(argv, list | tuple) and argv:
        return tuple(str(arg) for arg in argv)
    return tuple(cmdline)


def launch_config(
    dialect: str | None,
    cmdline: Sequence[str] = (),
    launch_args: Mapping[str, Any] | None = None,
    spec: SpecConfig | None = None,
) -> LaunchConfig:
    """The normalised launch configuration from what was recorded about a server.

    Args:
        dialect: The server's dialect (``"llamacpp"``, ``"vllm"``, ``"sglang"``, ``"openai"``).
        cmdline: The server process's command line (redacted), empty when not read.
        launch_args: ``ServerInfo.launch_args``: SGLang's arguments, or what llama.cpp
            (``/props``) and vLLM (``vllm:cache_config_info``) report; a command line under
            :data:`REPORTED_ARGV` is taken instead of ``cmdline``.
        spec: The speculative setup the server reports; where the arguments name it too, the
            server's own word wins (a fresh llama-server's ``/slots`` names no type, and then
            the command line's ``-md`` or ``--spec-type`` does).
    """
    cmdline = server_argv(launch_args, cmdline)
    args = dict(launch_args or {})
    args.pop(REPORTED_ARGV, None)
    # The program a command line runs names its engine even behind another dialect's front.
    engine = engine_of(cmdline) or (dialect if dialect in _TABLES else None)
    settings: dict[str, Setting] = {}
    others: list[Setting] = []
    reported: list[Setting] = []
    source: str | None = None
    if engine == "sglang" and args:
        settings, others = _server_args(engine, args)
        source = "/server_info"
    elif cmdline:
        settings, others = _command_line(engine, cmdline)
        source = COMMAND_LINE
    if engine != "sglang" and args:
        reported = _reported(engine, args)
    _with_reported_spec(engine, settings, spec)
    if settings.get(SPEC_METHOD, Setting("", None, "")).value == SPEC_OFF:
        for name in (DRAFT_LENGTH, "draft tokens per step", "draft top-k"):
            old = settings.get(name)
            if old is not None and old.origin.startswith("/"):
                del settings[name]
    ordered = tuple(settings[n] for n in SETTINGS if n in settings)
    return LaunchConfig(engine, source, ordered, tuple(others), tuple(reported))


def spec_with_arguments(spec: SpecConfig, launch: LaunchConfig) -> SpecConfig:
    """``spec`` with what the server left unsaid taken from its arguments: whether it drafts
    and how (a fresh llama-server's ``/slots`` names no type before its first request; vLLM's
    metrics never name a method, and a vLLM without stats says nothing) and the draft length
    (llama.cpp's ``/slots`` has no ``n_max`` in some builds). SGLang reports all of it."""
    from dataclasses import replace

    if spec.enabled is False or launch.engine == "sglang" or launch.source != COMMAND_LINE:
        return spec
    method = launch.value(SPEC_METHOD)
    length = launch.value(DRAFT_LENGTH)
    enabled = spec.enabled if spec.enabled is not None or method is None else method != SPEC_OFF
    algorithm = spec.algorithm or (method if enabled and method != SPEC_OFF else None)
    drafts = spec.num_draft_tokens
    if drafts is None and enabled and length is not None and length.isdigit():
        drafts = int(length)
    if (enabled, algorithm, drafts) == (spec.enabled, spec.algorithm, spec.num_draft_tokens):
        return spec
    source = f"{spec.source} and the command line" if spec.source else "the command line"
    return replace(
        spec, enabled=enabled, algorithm=algorithm, num_draft_tokens=drafts, source=source
    )


def server_with_arguments(info: ServerInfo, identity: ServerIdentity | None) -> ServerInfo:
    """``info`` with its gaps filled from its process's command line: the speculative setup
    (:func:`spec_with_arguments`), and the context length where the server did not say it (a
    vLLM whose ``/v1/models`` wants a key this monitor lacks); as it was when the process is
    not known."""
    from dataclasses import replace

    if identity is None or not identity.cmdline:
        return info
    launch = server_launch_config(info, identity)
    if launch is None:
        return info
    spec = spec_with_arguments(info.spec, launch)
    max_len = info.max_model_len
    if max_len is None:
        given = launch.value(CONTEXT_LENGTH) or ""
        max_len = int(given) if given.isdigit() and 0 < int(given) < 2**31 else None
    if spec == info.spec and max_len == info.max_model_len:
        return info
    return replace(info, spec=spec, max_model_len=max_len)


def server_launch_config(
    server: SnapshotServer | ServerInfo | None, identity: ServerIdentity | None = None
) -> LaunchConfig | None:
    """The launch configuration of a snapshot's server, or of a live server and its process.

    ``None`` when nothing about the server was recorded. A snapshot's own process identity is
    used unless ``identity`` is given; an identity without a process (a remote server) has no
    command line.
    """
    if server is None:
        return None
    raw = server.dialect
    dialect = raw.value if isinstance(raw, Enum) else raw
    process = identity if identity is not None else getattr(server, "process", None)
    spec: SpecConfig | None = getattr(server, "speculative", None) or getattr(server, "spec", None)
    cmdline = process.cmdline if process is not None and process.pid is not None else ()
    return launch_config(dialect, cmdline, server.launch_args, spec)


__all__ = [
    "COMMAND_LINE",
    "CONTEXT_LENGTH",
    "DRAFT_LENGTH",
    "IGNORED",
    "REPORTED_ARGV",
    "SETTINGS",
    "SPEC_METHOD",
    "SPEC_OFF",
    "LaunchConfig",
    "Setting",
    "engine_of",
    "launch_config",
    "parse_command_line",
    "server_argv",
    "server_launch_config",
    "server_with_arguments",
    "spec_with_arguments",
]
