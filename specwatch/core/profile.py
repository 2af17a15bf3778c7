"""A server profile in figures and words: per step kind, was it a CUDA graph or eager, what it
launched, how long the GPU sat idle inside it, what the collectives cost, which rank was slowest;
and what moved between two profiles.

The figures come from :mod:`specwatch.sources.profile.trace`; nothing here reads a file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

EAGER_BELOW = 0.5
"""A kind whose share of kernel time inside CUDA graphs is below this ran eager."""
MOVED = 0.10
"""A step time or launch count that changed by this much between two profiles moved."""


@dataclass(frozen=True, slots=True)
class WallMs:
    """A step kind's wall times."""

    mean: float
    p50: float
    p90: float


@dataclass(frozen=True, slots=True)
class KernelTime:
    name: str
    ms: float
    """Total over the kind's steps."""


@dataclass(frozen=True, slots=True)
class KindProfile:
    """One kind of step (``VERIFY``, ``DECODE``, ``DRAFT``, ``EXTEND``; vLLM ``VERIFY k=4``)."""

    kind: str
    n: int
    wall_ms: WallMs
    """The GPU-side extent where kernels were recorded (a graph step returns on the CPU right
    after its launch), else the step span's own duration."""
    gpu_busy_ms: float | None = None
    """Per step: time some kernel ran."""
    graph_share: float | None = None
    """Share of the kind's kernel time inside CUDA graphs."""
    eager_launches: float | None = None
    """Per step: kernels launched one by one."""
    graph_launches: float | None = None
    """Per step: ``cudaGraphLaunch`` calls."""
    launch_ms: float | None = None
    """Per step: host time in launch calls."""
    gpu_idle_ms: float | None = None
    """Per step: GPU-side extent not covered by any kernel."""
    collective_share: float | None = None
    """Share of the kind's kernel time in collectives (NCCL, custom all-reduce)."""
    top_kernels: tuple[KernelTime, ...] = ()
    batch: int | None = None
    """Median requests a step, where the span's name says (SGLang ``bs=``, vLLM)."""
    tokens: int | None = None
    """Median tokens a step computes, where the span's name says (vLLM, SGLang ``toks=``)."""


@dataclass(frozen=True, slots=True)
class RankProfile:
    """One rank's trace."""

    rank: int
    file: str
    kinds: tuple[KindProfile, ...]
    kernel_ms: float = 0.0
    collective_ms: float = 0.0
    gpu_activity: bool = False
    events: int = 0
    unclosed: int = 0
    """Step spans without an end (left out)."""
    dropped: int = 0
    """Step spans past the reader's bound on steps or kinds (left out)."""
    unmatched: int = 0
    """Launches or kernels past the reader's bound on those waiting for a match."""

    @property
    def compute_ms(self) -> float:
        """Kernel time outside collectives: what makes a rank slow (the others wait for it
        inside the collective, so their wall time is as long)."""
        return self.kernel_ms - self.collective_ms


@dataclass(frozen=True, slots=True)
class ProfileSummary:
    """All ranks of one profile."""

    kinds: tuple[KindProfile, ...]
    """Rank 0's kinds (every TP rank runs the same steps); the first rank read when 0 is not."""
    ranks: tuple[RankProfile, ...]
    gpu_activity: bool
    slowest_rank: int | None = None
    spread: float | None = None
    """Slowest rank's non-collective kernel time over the fastest's, minus 1."""
    problems: tuple[str, ...] = field(default=())

    def kind(self, name: str) -> KindProfile | None:
        """The kind named ``name`` or starting with it (``VERIFY`` finds ``VERIFY k=4``)."""
        for k in self.kinds:
            if k.kind == name or k.kind.startswith(name + " "):
                return k
        return None


def summarise(ranks: Sequence[RankProfile], problems: Sequence[str] = ()) -> ProfileSummary:
    """The ranks together: rank 0's kinds, the slowest rank and the spread."""
    ordered = sorted(ranks, key=lambda r: r.rank)
    gpu = any(r.gpu_activity for r in ordered)
    slowest: int | None = None
    spread: float | None = None
    if gpu and len(ordered) > 1:
        by_compute = sorted(ordered, key=lambda r: r.compute_ms)
        slowest = by_compute[-1].rank
        low = by_compute[0].compute_ms
        spread = by_compute[-1].compute_ms / low - 1.0 if low > 0 else None
    kinds = ordered[0].kinds if ordered else ()
    return ProfileSummary(tuple(kinds), tuple(ordered), gpu, slowest, spread, tuple(problems))


def _graphs(k: KindProfile) -> bool:
    return k.graph_share is not None and k.graph_share >= EAGER_BELOW


def kind_words(k: KindProfile) -> str:
    """``VERIFY ran eager: 0 graph launches, 1,812 kernel launches a step, GPU idle 11.5 of
    29.3 ms`` or ``DECODE ran in CUDA graphs: ...``."""
    head = k.kind.split(" ")[0]
    if k.graph_share is None:
        return f"{head}: {k.n} steps, {k.wall_ms.mean:.1f} ms a step"
    idle = f"GPU idle {k.gpu_idle_ms or 0.0:.1f} of {k.wall_ms.mean:.1f} ms"
    launches = (
        f"{k.graph_launches or 0.0:,.0f} graph launches, "
        f"{k.eager_launches or 0.0:,.0f} kernel launches a step"
    )
    if _graphs(k):
        return f"{head} ran in CUDA graphs ({k.graph_share:.0%} of kernel time): {launches}, {idle}"
    return f"{head} ran eager: {launches}, {idle}"


def verdict(summary: ProfileSummary, settings: Mapping[str, str]) -> str:
    """Where the verify step's time goes, in one paragraph (issue: verify eager beside decode
    in graphs, with the engine's own settings and, where the evidence supports it, what to
    try)."""
    if not summary.kinds:
        return (
            "the trace holds no engine steps: the server ran none while profiling"
            " (profile while it serves requests)"
        )
    if not summary.gpu_activity:
        parts = [
            f"{k.kind}: {k.n} steps, mean {k.wall_ms.mean:.2f} ms (CPU span)" for k in summary.kinds
        ]
        return (
            "no GPU activity was recorded (CPU activities only): "
            + "; ".join(parts)
            + "; graph against eager cannot be told"
        )
    verify = summary.kind("VERIFY")
    decode = summary.kind("DECODE") or summary.kind("DRAFT")
    lines = [kind_words(k) for k in (verify, decode) if k is not None]
    if not lines:
        lines = [kind_words(k) for k in summary.kinds[:3]]
    if verify is not None and verify.graph_share is not None and not _graphs(verify):
        if decode is not None and _graphs(decode):
            other = decode.kind.split(" ")[0].lower()
            lines.append(f"verify cannot use the CUDA graphs {other} uses")
        lines.extend(_graph_settings(verify, settings))
    if verify is not None and verify.collective_share and verify.collective_share >= 0.2:
        lines.append(f"collectives take {verify.collective_share:.0%} of verify's kernel time")
    if summary.slowest_rank is not None and summary.spread is not None and summary.spread >= 0.05:
        lines.append(
            f"slowest rank {summary.slowest_rank} (+{summary.spread:.0%} non-collective kernel"
            " time over the fastest)"
        )
    return "; ".join(lines)


def _largest(value: str | None) -> int | None:
    """The largest number in a setting (``16``, ``[1, 2, 4, 8]``, a JSON object's field)."""
    sizes = [int(n) for n in re.findall(r"\d{1,9}", value or "")]
    return max(sizes) if sizes else None


def _setting(settings: Mapping[str, str], *names: str) -> tuple[str, int] | None:
    for name in names:
        largest = _largest(settings.get(name))
        if largest is not None:
            return name, largest
    return None


def _true(settings: Mapping[str, str], name: str) -> bool:
    return settings.get(name, "").strip().lower() in ("true", "1", "yes")


def _graph_settings(verify: KindProfile, settings: Mapping[str, str]) -> list[str]:
    """The engine's CUDA-graph settings beside an eager verify step: captured sizes against
    the verify batch, and what to try only where a setting explains it."""
    if _true(settings, "disable_cuda_graph"):
        return ["the server runs with --disable-cuda-graph: try without it"]
    if _true(settings, "enforce_eager"):
        return ["the server runs with --enforce-eager: try without it"]
    if verify.kind.startswith("VERIFY k="):  # vLLM captures by tokens a step
        tokens = verify.tokens
        found = _setting(settings, "max_cudagraph_capture_size", "cudagraph_capture_sizes")
        if tokens is None or found is None:
            return [] if tokens is None else [f"verify computes {tokens} tokens a step"]
        name, largest = found
        if tokens <= largest:
            return [
                f"verify's {tokens} tokens a step are within the captured sizes ({name} {largest})"
            ]
        size = -(-tokens // 8) * 8 if tokens > 8 else 8
        return [
            f"verify computes {tokens} tokens a step, past the largest captured size {largest}"
            f" ({name}): try --compilation-config '{{\"max_cudagraph_capture_size\": {size}}}'"
        ]
    batch = verify.batch
    found = _setting(
        settings,
        "cuda_graph_max_bs_decode",
        "cuda_graph_max_bs",
        "cuda_graph_bs_decode",
        "cuda_graph_bs",
        "decode_cuda_graph_bs",
    )
    if batch is None or found is None:
        return []
    name, largest = found
    draft = _largest(settings.get("speculative_num_draft_tokens"))
    made = f" ({batch} x {draft} = {batch * draft} tokens)" if draft else ""
    if batch <= largest:
        return [
            f"the verify batch of {batch} requests{made} is within the captured batch sizes"
            f" ({name} {largest})"
        ]
    size = 1 << (batch - 1).bit_length()
    return [
        f"the verify batch of {batch} requests{made} is past the largest captured batch size"
        f" {largest} ({name}): try --cuda-graph-max-bs {size}"
    ]


def summary_lines(summary: ProfileSummary) -> list[str]:
    """A table of the kinds, one line each, then one line per problem."""
    out = [
        f"{'kind':<14} {'n':>4} {'mean ms':>8} {'p90 ms':>8} {'graph':>6} {'eager/st':>8}"
        f" {'graph/st':>8} {'idle ms':>8} {'coll':>5}"
    ]

    def pct(v: float | None) -> str:
        return "–" if v is None else f"{v:.0%}"

    def num(v: float | None, fmt: str = ".1f") -> str:
        return "–" if v is None else format(v, fmt)

    for k in summary.kinds:
        out.append(
            f"{k.kind[:14]:<14} {k.n:>4} {k.wall_ms.mean:>8.2f} {k.wall_ms.p90:>8.2f}"
            f" {pct(k.graph_share):>6} {num(k.eager_launches, ',.0f'):>8}"
            f" {num(k.graph_launches, ',.0f'):>8} {num(k.gpu_idle_ms):>8}"
            f" {pct(k.collective_share):>5}"
        )
    if len(summary.ranks) > 1:
        out.append(f"{len(summary.ranks)} ranks read")
    out.extend(f"problem: {p}" for p in summary.problems)
    return out


def _kind_json(k: KindProfile) -> dict[str, Any]:
    return {
        "kind": k.kind,
        "n": k.n,
        "wall_ms": {"mean": k.wall_ms.mean, "p50": k.wall_ms.p50, "p90": k.wall_ms.p90},
        "gpu_busy_ms": k.gpu_busy_ms,
        "graph_share": k.graph_share,
        "eager_launches": k.eager_launches,
        "graph_launches": k.graph_launches,
        "launch_ms": k.launch_ms,
        "gpu_idle_ms": k.gpu_idle_ms,
        "collective_share": k.collective_share,
        "top_kernels": [{"name": t.name, "ms": t.ms} for t in k.top_kernels],
        "batch": k.batch,
        "tokens": k.tokens,
    }


def profile_to_json(s: ProfileSummary) -> dict[str, Any]:
    """The fields the profile file and ``--json`` carry (``kinds``, ``ranks``, ...)."""
    return {
        "kinds": [_kind_json(k) for k in s.kinds],
        "ranks": [
            {
                "rank": r.rank,
                "file": r.file,
                "kernel_ms": r.kernel_ms,
                "collective_ms": r.collective_ms,
                "gpu_activity": r.gpu_activity,
                "kinds": [_kind_json(k) for k in r.kinds],
            }
            for r in s.ranks
        ],
        "gpu_activity": s.gpu_activity,
        "slowest_rank": s.slowest_rank,
        "spread": s.spread,
        "problems": list(s.problems),
    }


def _opt(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**9 else None


def _kind_from(d: Mapping[str, Any]) -> KindProfile:
    w = d.get("wall_ms") or {}
    return KindProfile(
        kind=str(d.get("kind", "?"))[:40],
        n=int(d.get("n") or 0),
        wall_ms=WallMs(
            _opt(w.get("mean")) or 0.0, _opt(w.get("p50")) or 0.0, _opt(w.get("p90")) or 0.0
        ),
        gpu_busy_ms=_opt(d.get("gpu_busy_ms")),
        graph_share=_opt(d.get("graph_share")),
        eager_launches=_opt(d.get("eager_launches")),
        graph_launches=_opt(d.get("graph_launches")),
        launch_ms=_opt(d.get("launch_ms")),
        gpu_idle_ms=_opt(d.get("gpu_idle_ms")),
        collective_share=_opt(d.get("collective_share")),
        top_kernels=tuple(
            KernelTime(str(t.get("name", ""))[:200], _opt(t.get("ms")) or 0.0)
            for t in (d.get("top_kernels") or [])[:20]
            if isinstance(t, Mapping)
        ),
        batch=_count(d.get("batch")),
        tokens=_count(d.get("tokens")),
    )


def profile_from_json(d: Mapping[str, Any]) -> ProfileSummary:
    """A profile file's summary back (unknown or odd fields become ``None``).

    Raises:
        ValueError: Not a profile document.
    """
    if d.get("kind") != "profile" or not isinstance(d.get("kinds"), list):
        raise ValueError("not a specwatch profile (no kind: profile)")
    kinds = tuple(_kind_from(k) for k in d["kinds"][:64] if isinstance(k, Mapping))
    ranks = tuple(
        RankProfile(
            rank=int(r.get("rank") or 0),
            file=str(r.get("file", ""))[:300],
            kinds=tuple(
                _kind_from(k) for k in (r.get("kinds") or [])[:64] if isinstance(k, Mapping)
            ),
            kernel_ms=_opt(r.get("kernel_ms")) or 0.0,
            collective_ms=_opt(r.get("collective_ms")) or 0.0,
            gpu_activity=bool(r.get("gpu_activity")),
        )
        for r in (d.get("ranks") or [])[:1024]
        if isinstance(r, Mapping)
    )
    slowest = d.get("slowest_rank")
    return ProfileSummary(
        kinds,
        ranks,
        bool(d.get("gpu_activity")),
        int(slowest) if isinstance(slowest, int) else None,
        _opt(d.get("spread")),
        tuple(str(p)[:300] for p in (d.get("problems") or [])[:50]),
    )


def _change(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return b / a - 1.0


def compare_profiles(a: ProfileSummary, b: ProfileSummary) -> list[str]:
    """What moved from ``a`` to ``b``: per kind both have, step time, graph share and launches
    (a change under :data:`MOVED` is not named); a kind only one has is named too."""
    out: list[str] = []
    names_b = {k.kind.split(" ")[0]: k for k in b.kinds}
    for ka in a.kinds:
        head = ka.kind.split(" ")[0]
        kb = names_b.pop(head, None)
        if kb is None:
            out.append(f"{head}: only in the first profile")
            continue
        moved: list[str] = []
        wall = _change(ka.wall_ms.mean, kb.wall_ms.mean)
        if wall is not None and abs(wall) >= MOVED:
            moved.append(f"step {ka.wall_ms.mean:.1f} → {kb.wall_ms.mean:.1f} ms ({wall:+.0%})")
        ga, gb = ka.graph_share, kb.graph_share
        if ga is not None and gb is not None and abs(gb - ga) >= MOVED:
            moved.append(f"in graphs {ka.graph_share:.0%} → {kb.graph_share:.0%}")
        launches = _change(ka.eager_launches, kb.eager_launches)
        if launches is not None and abs(launches) >= MOVED:
            moved.append(
                f"kernel launches a step {ka.eager_launches:,.0f} → {kb.eager_launches:,.0f}"
            )
        out.append(f"{head}: " + ("; ".join(moved) if moved else "no change"))
    out.extend(f"{head}: only in the second profile" for head in names_b)
    return out
