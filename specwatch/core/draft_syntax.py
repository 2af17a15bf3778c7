"""A draft length written the way the running engine, at its version, takes it.

The syntax comes from the server's own command line where it is readable (a local process),
else from what the server says of itself (llama.cpp's ``/slots`` type, SGLang's
``/server_info``), else the current spelling with a caveat naming the older one:

* llama.cpp: the option that set the draft length (``--spec-draft-n-max`` since the
  speculative-parameters rename, ``--draft-max`` before it; n-gram types have their own:
  ``--spec-ngram-simple-size-m``, ``--spec-ngram-mod-n-max`` ...);
* vLLM: the running ``--speculative-config`` JSON with only ``num_speculative_tokens``
  changed, every other key (``method``, ``model`` ...) kept, quoted for a POSIX shell; the
  pre-JSON ``--num-speculative-tokens`` option where the server was started with it. A
  batch-size table (``num_speculative_tokens_per_batch_size``: inclusive ``[low, high, k]``
  ranges; a gap inherits the previous range's k, and k is clamped to
  ``num_speculative_tokens``) where the best k differs by batch;
* SGLang: chain drafting flags (topk 1; the draft tokens count the root).

* TensorRT-LLM: ``speculative_config: {decoding_type: ..., max_draft_len: ...}`` in the YAML
  file ``trtllm-serve`` reads (``--config``, ``--extra_llm_api_options`` before it), with the
  running ``decoding_type`` and draft model (``speculative_config_info``).

SGLang, llama.cpp and TensorRT-LLM take one draft length for every batch.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specwatch.core.launch_config import server_argv
from specwatch.core.server import Dialect, ServerInfo

LLAMA_DRAFT_NEW = "--spec-draft-n-max"
LLAMA_DRAFT_OLD = "--draft-max"
LLAMA_OLD_ALIASES = ("--draft-max", "--draft", "--draft-n")
"""Names this option had before llama.cpp's speculative-parameters rename; the renamed
builds reject them ("the argument has been removed")."""
LLAMA_TYPE_FLAGS = {
    "ngram-simple": "--spec-ngram-simple-size-m",
    "ngram-map-k": "--spec-ngram-map-k-size-m",
    "ngram-map-k4v": "--spec-ngram-map-k4v-size-m",
    "ngram-mod": "--spec-ngram-mod-n-max",
}
"""The option that sets the draft length of each n-gram type (draft-model types share
``--spec-draft-n-max``)."""
VLLM_CONFIG_FLAGS = ("--speculative-config", "--speculative_config", "-sc")
VLLM_OLD_FLAG = "--num-speculative-tokens"
CMDLINE = "the server's command line"
MAX_CONFIG_CHARS = 4096
"""A ``--speculative-config`` value longer than this is not parsed (it is not one)."""


@dataclass(frozen=True, slots=True)
class EngineSyntax:
    """How the running engine takes a draft length, and where that was read."""

    dialect: Dialect
    draft_flag: str | None = None
    """llama.cpp: the option that sets the draft length; vLLM: ``--num-speculative-tokens``
    on a server started with it (else the JSON config is used)."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """vLLM: the running ``--speculative-config``, whose other keys a new one must keep."""
    source: str = "assumed"
    """Where the syntax was read: ``"the server's command line"``, ``"/slots"`` ..."""
    caveat: str | None = None
    """What the user must check or add, when the syntax is not read from the server itself."""


def _values(argv: Sequence[str], names: Sequence[str]) -> list[str]:
    """The values given to any of ``names`` (``--x v`` or ``--x=v``), in order."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in names:
            if eq:
                out.append(value)
            elif i + 1 < len(argv):
                out.append(argv[i + 1])
    return out


def _has(argv: Sequence[str], prefix: str) -> bool:
    return any(a.partition("=")[0].startswith(prefix) for a in argv)


def _llamacpp(argv: Sequence[str], info: ServerInfo | None) -> EngineSyntax:
    types = [t.strip() for v in _values(argv, ("--spec-type",)) for t in v.split(",")]
    if not types and info is not None and info.spec.algorithm:
        types = [t.strip() for t in info.spec.algorithm.split(",")]
    for t in types:
        if t in LLAMA_TYPE_FLAGS:
            where = CMDLINE if argv else "the server's speculative type"
            return EngineSyntax(Dialect.LLAMACPP, LLAMA_TYPE_FLAGS[t], source=where)
    if argv:
        if any(a.partition("=")[0] in LLAMA_OLD_ALIASES for a in argv):
            return EngineSyntax(Dialect.LLAMACPP, LLAMA_DRAFT_OLD, source=CMDLINE)
        if _has(argv, "--spec-"):
            return EngineSyntax(Dialect.LLAMACPP, LLAMA_DRAFT_NEW, source=CMDLINE)
    return EngineSyntax(
        Dialect.LLAMACPP,
        LLAMA_DRAFT_NEW,
        caveat=f"builds before llama.cpp's speculative-parameters rename take {LLAMA_DRAFT_OLD}",
    )


def _vllm(argv: Sequence[str], info: ServerInfo | None) -> EngineSyntax:
    for raw in _values(argv, VLLM_CONFIG_FLAGS):
        if len(raw) > MAX_CONFIG_CHARS:
            continue
        try:
            config = json.loads(raw)
        except ValueError:
            continue
        if isinstance(config, dict):
            return EngineSyntax(Dialect.VLLM, config=config, source=CMDLINE)
    if _values(argv, (VLLM_OLD_FLAG,)):
        return EngineSyntax(Dialect.VLLM, VLLM_OLD_FLAG, source=CMDLINE)
    known: dict[str, Any] = {}
    if info is not None and info.spec.algorithm:
        known["method"] = info.spec.algorithm
    if info is not None and info.spec.draft_model:
        known["model"] = info.spec.draft_model
    missing = [k for k in ("method", "model") if k not in known]
    caveat = (
        f"add your {' and '.join(missing)} key{'s' if len(missing) > 1 else ''}; "
        "the server's command line was not readable"
        if missing
        else None
    )
    return EngineSyntax(Dialect.VLLM, config=known, source="the server's detection", caveat=caveat)


TRTLLM_CONFIG_FLAGS = ("--config", "--extra_llm_api_options")


def _trtllm(argv: Sequence[str], info: ServerInfo | None) -> EngineSyntax:
    flag = next((f for f in TRTLLM_CONFIG_FLAGS if _values(argv, (f,))), None)
    known: dict[str, Any] = {}
    if info is not None and info.spec.algorithm:
        known["decoding_type"] = info.spec.algorithm
    if info is not None and info.spec.draft_model:
        known["speculative_model"] = info.spec.draft_model
    caveat = None if "decoding_type" in known else "add your decoding_type (Eagle3, MTP, ...)"
    return EngineSyntax(
        Dialect.TRTLLM,
        draft_flag=flag or "--extra_llm_api_options",
        config=known,
        source=CMDLINE if flag else "speculative_config_info" if known else "assumed",
        caveat=caveat,
    )


def trtllm_setting(k: int, k_running: int, s: EngineSyntax) -> str:
    """TensorRT-LLM: the ``speculative_config`` block of the YAML ``trtllm-serve`` reads."""
    if k <= 0:
        return f"turn speculation off: drop speculative_config from the {s.draft_flag} file"
    fields = {**s.config, "max_draft_len": k}
    inner = ", ".join(f"{key}: {value}" for key, value in fields.items())
    text = (
        f"{'keep ' if k == k_running else ''}speculative_config: {{{inner}}} ({s.draft_flag} file)"
    )
    return f"{text} ({s.caveat})" if s.caveat else text


def _unread(dialect: Dialect) -> EngineSyntax:
    """The syntax when nothing about the server was read."""
    if dialect is Dialect.LLAMACPP:
        return _llamacpp((), None)
    if dialect is Dialect.VLLM:
        return _vllm((), None)
    if dialect is Dialect.TRTLLM:
        return _trtllm((), None)
    return EngineSyntax(dialect)


def engine_syntax(info: ServerInfo | None, argv: Sequence[str] = ()) -> EngineSyntax:
    """The syntax of the server ``info`` describes, started with ``argv`` (empty: unknown; a
    command line the server reports itself wins, :func:`~.launch_config.server_argv`)."""
    dialect = info.dialect if info is not None else Dialect.OPENAI
    argv = server_argv(info.launch_args if info is not None else None, argv)
    if dialect is Dialect.LLAMACPP:
        return _llamacpp(argv, info)
    if dialect is Dialect.VLLM:
        return _vllm(argv, info)
    if dialect is Dialect.TRTLLM:
        return _trtllm(argv, info)
    if dialect is Dialect.SGLANG:
        where = "/server_info" if info is not None and info.launch_args else "assumed"
        return EngineSyntax(Dialect.SGLANG, source=where)
    return EngineSyntax(dialect)


def ranges(per_batch: Sequence[tuple[int, int]]) -> list[list[int]]:
    """``[[low, high, k], ...]`` from ``(batch, best k)`` pairs in ascending batch order.

    Neighbouring bins with the same k merge; a range runs up to the batch before the next
    bin's, the first starts at 1 and the last ends at the last measured batch.
    """
    out: list[list[int]] = []
    for i, (batch, k) in enumerate(per_batch):
        high = per_batch[i + 1][0] - 1 if i + 1 < len(per_batch) else batch
        if out and out[-1][2] == k:
            out[-1][1] = high
        else:
            out.append([1 if not out else out[-1][1] + 1, high, k])
    return out


def _vllm_config(s: EngineSyntax, update: Mapping[str, Any]) -> str:
    config = {**s.config, **update}
    text = f"--speculative-config {shlex.quote(json.dumps(config))}"
    return f"{text} ({s.caveat})" if s.caveat else text


def vllm_setting(k_running: int, per_batch: Sequence[tuple[int, int]], s: EngineSyntax) -> str:
    """vLLM: keep, change or drop ``num_speculative_tokens``, or a per-batch table."""
    table = ranges(per_batch)
    ks = {r[2] for r in table}
    if ks == {0}:
        flag = s.draft_flag or "--speculative-config"
        return f"turn speculation off: drop {flag}"
    if len(ks) == 1:
        (k,) = ks
        if k == k_running:
            return f"keep num_speculative_tokens={k}"
        if s.draft_flag is not None:
            return f"{s.draft_flag} {k}"
        return _vllm_config(s, {"num_speculative_tokens": k})
    return _vllm_config(
        s, {"num_speculative_tokens": max(ks), "num_speculative_tokens_per_batch_size": table}
    )


def sglang_setting(k: int, k_running: int) -> str:
    """SGLang (chain drafting: topk 1; the draft tokens count the root)."""
    if k <= 0:
        return "turn speculation off: drop --speculative-algorithm"
    keep = "keep " if k == k_running else ""
    return (
        f"{keep}--speculative-num-steps {k} --speculative-eagle-topk 1 "
        f"--speculative-num-draft-tokens {k + 1}"
    )


def llamacpp_setting(k: int, k_running: int, s: EngineSyntax | None = None) -> str:
    """llama-server, in the option its build and speculative type take."""
    if k <= 0:
        return "turn speculation off: start llama-server without --spec-type or a draft model"
    flag = (s.draft_flag if s is not None else None) or LLAMA_DRAFT_NEW
    text = f"{'keep ' if k == k_running else ''}{flag} {k}"
    return f"{text} ({s.caveat})" if s is not None and s.caveat else text


def engine_setting(
    dialect: Dialect,
    k_running: int,
    per_batch: Sequence[tuple[int, int]],
    main_batch: int,
    syntax: EngineSyntax | None = None,
) -> str:
    """The recommendation in ``dialect``'s own syntax.

    Args:
        dialect: The running engine.
        k_running: The draft tokens it runs now.
        per_batch: ``(batch, best k)`` pairs, ascending.
        main_batch: The batch a one-value engine is tuned for (where the server ran most).
        syntax: How this server takes the setting (default: the current spelling, unread).
    """
    s = syntax if syntax is not None and syntax.dialect is dialect else _unread(dialect)
    if dialect is Dialect.VLLM:
        return vllm_setting(k_running, per_batch, s)
    k = dict(per_batch).get(main_batch, k_running)
    if dialect is Dialect.SGLANG:
        return sglang_setting(k, k_running)
    if dialect is Dialect.LLAMACPP:
        return llamacpp_setting(k, k_running, s)
    if dialect is Dialect.TRTLLM:
        return trtllm_setting(k, k_running, s)
    return f"{k} draft tokens per step" if k > 0 else "turn speculation off"


__all__ = [
    "LLAMA_DRAFT_NEW",
    "LLAMA_DRAFT_OLD",
    "EngineSyntax",
    "engine_setting",
    "engine_syntax",
    "llamacpp_setting",
    "ranges",
    "sglang_setting",
    "trtllm_setting",
    "vllm_setting",
]
