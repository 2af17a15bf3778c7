"""What of a server's environment is shown: the variables that matter for performance, by name.

:data:`ENV_NAMES` keep their values; any other variable under one of :data:`ENV_PREFIXES` is shown
as present with its value withheld; a secret-looking name (:mod:`specwatch.core.redaction`) is
left out, even on the list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from specwatch.core.redaction import WITHHELD, is_secret_name, redact_text

ENV_PREFIXES = (
    "NCCL_",
    "CUDA_",
    "NVIDIA_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "PYTORCH_",
    "SGLANG_",
    "SGL_",
    "VLLM_",
    "LLAMA_",
    "GGML_",
    "OMP_",
    "TRITON_",
    "FLASHINFER_",
    "NVTE_",
)
"""Variables under these prefixes are shown: by value when named in :data:`ENV_NAMES`, else as
present with the value withheld (an unknown ``VLLM_S3_URL`` may carry credentials)."""
ENV_NAMES = (
    # which libraries are loaded
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    # NCCL tuning
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_BUFFSIZE",
    "NCCL_NTHREADS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_CTAS",
    "NCCL_MIN_CTAS",
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_P2P_NET_CHUNKSIZE",
    "NCCL_P2P_NVL_CHUNKSIZE",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_TC",
    "NCCL_IB_TIMEOUT",
    "NCCL_IB_QPS_PER_CONNECTION",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_SOCKET_IFNAME",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_NSOCKS_PERTHREAD",
    "NCCL_CROSS_NIC",
    "NCCL_NVLS_ENABLE",
    "NCCL_CUMEM_ENABLE",
    "NCCL_COLLNET_ENABLE",
    "NCCL_PXN_DISABLE",
    "NCCL_LAUNCH_MODE",
    "NCCL_GRAPH_MIXING_SUPPORT",
    "NCCL_TOPO_FILE",
    "NCCL_DEBUG",
    # device selection and CUDA behaviour
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_MODULE_LOADING",
    "CUDA_CACHE_DISABLE",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_TF32_OVERRIDE",
    # torch
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "TORCH_CUDA_ARCH_LIST",
    "TORCH_COMPILE_DISABLE",
    "TORCH_NCCL_AVOID_RECORD_STREAMS",
    "TORCH_NCCL_BLOCKING_WAIT",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "TORCHINDUCTOR_COMPILE_THREADS",
    "TORCHINDUCTOR_MAX_AUTOTUNE",
    "OMP_NUM_THREADS",
    # vLLM
    "VLLM_USE_V1",
    "VLLM_ATTENTION_BACKEND",
    "VLLM_FLASH_ATTN_VERSION",
    "VLLM_USE_FLASHINFER_SAMPLER",
    "VLLM_FLASHINFER_FORCE_TENSOR_CORES",
    "VLLM_USE_TRITON_FLASH_ATTN",
    "VLLM_USE_DEEP_GEMM",
    "VLLM_USE_FLASHINFER_MOE_FP8",
    "VLLM_USE_FLASHINFER_MOE_FP4",
    "VLLM_ALL2ALL_BACKEND",
    "VLLM_FUSED_MOE_CHUNK_SIZE",
    "VLLM_MOE_DP_CHUNK_SIZE",
    "VLLM_MLA_DISABLE",
    "VLLM_ENABLE_V1_MULTIPROCESSING",
    "VLLM_WORKER_MULTIPROC_METHOD",
    "VLLM_DISABLE_COMPILE_CACHE",
    "VLLM_USE_STANDALONE_COMPILE",
    "VLLM_ENABLE_INDUCTOR_MAX_AUTOTUNE",
    "VLLM_ALLREDUCE_USE_SYMM_MEM",
    "VLLM_MARLIN_USE_ATOMIC_ADD",
    "VLLM_ROCM_USE_AITER",
    # SGLang
    "SGLANG_ENABLE_TORCH_COMPILE",
    "SGLANG_ENABLE_JIT_DEEPGEMM",
    "SGL_ENABLE_JIT_DEEPGEMM",
    "SGLANG_ENABLE_SPEC_V2",
    "SGLANG_USE_AITER",
    "SGLANG_CUTLASS_MOE",
    "SGLANG_MOE_PADDING",
    "SGLANG_SET_CPU_AFFINITY",
    "SGLANG_ENABLE_DETERMINISTIC_INFERENCE",
    "SGLANG_IS_FLASHINFER_AVAILABLE",
    # llama.cpp / ggml
    "GGML_CUDA_DISABLE_GRAPHS",
    "GGML_CUDA_FORCE_MMQ",
    "GGML_CUDA_FORCE_CUBLAS",
    "GGML_CUDA_NO_PINNED",
    "GGML_CUDA_ENABLE_UNIFIED_MEMORY",
    "LLAMA_ARG_N_GPU_LAYERS",
    "LLAMA_ARG_CTX_SIZE",
    "LLAMA_ARG_BATCH",
    "LLAMA_ARG_UBATCH",
    "LLAMA_ARG_N_PARALLEL",
    "LLAMA_ARG_THREADS",
    "LLAMA_ARG_FLASH_ATTN",
    "LLAMA_ARG_CONT_BATCHING",
    "LLAMA_ARG_DRAFT_MAX",
    "LLAMA_ARG_DRAFT_MIN",
    # other kernels
    "TRITON_CACHE_DIR",
    "FLASHINFER_WORKSPACE_BASE",
    "NVTE_FUSED_ATTN",
    "NVTE_FLASH_ATTN",
)
"""Variables recorded with their values: known to matter for performance. The list grows by
name, never by prefix (a prefix would let ``VLLM_S3_URL=s3://key:secret@bucket`` through)."""

_KNOWN_ENV = frozenset(ENV_NAMES)

MAX_ENV_VALUE = 4096
"""Longer environment values are cut (``LD_LIBRARY_PATH`` can be long)."""
MAX_ENV_VARS = 256


def env_allowed(name: str) -> bool:
    """Whether an environment variable is shown at all (allow-listed and not secret-looking)."""
    if is_secret_name(name):
        return False
    return name in _KNOWN_ENV or name.startswith(ENV_PREFIXES)


def env_value(name: str, value: str) -> str:
    """What is shown of an allowed variable's value: a known name's (without URL passwords),
    else :data:`~specwatch.core.redaction.WITHHELD`."""
    return redact_text(value) if name in _KNOWN_ENV else WITHHELD


def filter_environment(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The allowed part of an environment, sorted by name, values withheld or bounded."""
    kept: list[tuple[str, str]] = []
    for name in sorted(env):
        if not env_allowed(name):
            continue
        value = env_value(name, env[name])
        if len(value) > MAX_ENV_VALUE:
            value = value[: MAX_ENV_VALUE - 1] + "…"
        kept.append((name, value))
        if len(kept) >= MAX_ENV_VARS:
            break
    return tuple(kept)


def _env_note(pid: int, name: str, value: str, recorded: str) -> str:
    if value == WITHHELD or recorded == WITHHELD:
        return f"process {pid} sets {name} to another value (withheld)"
    return f"process {pid} sets {name}={value} (recorded: {recorded})"


def merge_environments(
    envs: Iterable[tuple[int, Mapping[str, str]]],
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Merge the allow-listed environments of a process tree (root first).

    Returns the merged environment (the first process that sets a name wins) and a note for
    each child that sets a variable to another value than the process before it.
    """
    merged: dict[str, str] = {}
    notes: list[str] = []
    for pid, env in envs:
        for name, value in filter_environment(env):
            if name not in merged:
                merged[name] = value
            elif merged[name] != value and len(notes) < 20:
                notes.append(_env_note(pid, name, value, merged[name]))
    return tuple(sorted(merged.items()))[:MAX_ENV_VARS], tuple(notes)


__all__ = [
    "ENV_NAMES",
    "ENV_PREFIXES",
    "MAX_ENV_VALUE",
    "MAX_ENV_VARS",
    "env_allowed",
    "env_value",
    "filter_environment",
    "merge_environments",
]
