"""The protocol every server dialect implements, and the registry that finds them.

A dialect is everything specwatch knows about one server family: how to recognise it and read
its speculative setup, which ``/metrics`` series give which windowed number (and how their
names changed between versions), how to ask for a stream and read its chunks, and how to get an
accept length out of counter deltas over a benchmark run. The machinery in
``sources/{detect,metrics,stream}.py`` is the same for every server and asks the dialect.
How a family's series combine across labels (replicas, parallel schedulers, breakdowns, series
set apart) is one rule for every dialect, in :mod:`specwatch.sources.metrics.prom`.

A module of this package that binds a :class:`ServerDialect` to the name ``DIALECT`` is a
dialect; the registry (:func:`all_dialects`) imports every module of the package and keeps
those. Adding a server is one module here (plus its member of
:class:`specwatch.core.server.Dialect`).

Below the registry are the pieces a dialect derives one
:class:`~specwatch.core.server.MetricsWindow` with: :class:`WindowBuilder` collects values with
the series each came from and notes for the missing ones; the functions compute counter and
histogram deltas between two scrapes; the ``spec_*`` helpers read the speculative counters vLLM
defines and llama.cpp copied.
"""

from __future__ import annotations

import abc
import functools
import importlib
import math
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from specwatch.core.server import Dialect, LatencyBucket, ServerInfo
from specwatch.core.values import as_float
from specwatch.sources.dialects.llamacpp_timings import decode_steps, spec_from_timings
from specwatch.sources.identity.server_queries import scrape_metrics
from specwatch.sources.metrics.prom import Histogram, LabelMatch, Scrape

if TYPE_CHECKING:
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.stream_steps import StreamAccumulator


ONE_CHUNK_PER_STEP = (
    "one chunk per engine step; chunks the client fell behind on are merged by the "
    "server, so steps can be undercounted"
)
"""The step note of servers that send one chunk per engine step."""


SIDE_EVERY_S = 10.0
"""Seconds between two reads of a dialect's :meth:`ServerDialect.side_figures`: lifetime
figures, and each read asks the server's scheduler for its state."""


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """One generation to stream, independent of the server."""

    prompt: str
    max_tokens: int
    temperature: float
    ignore_eos: bool


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """How a dialect streams: the requests to try in order and how tokens are counted."""

    attempts: tuple[tuple[str, dict[str, Any]], ...]
    """``(path, JSON body)``; the next one is tried when a path answers 404/405."""
    count_source: str
    """Where exact token counts come from, e.g. ``"meta_info.completion_tokens"``."""


class ServerDialect(abc.ABC):
    """One server family. Subclass it in a module of ``sources/dialects/`` named after the
    server and bind an instance to the module-level name ``DIALECT``; the registry finds it."""

    dialect: ClassVar[Dialect]
    """The name used in ``ServerInfo``, snapshots and on the command line."""
    owned_by: ClassVar[tuple[str, ...]] = ()
    """``/v1/models`` ``owned_by`` values that name this server."""
    fingerprint_order: ClassVar[int] = 100
    """When ``owned_by`` says nothing, dialects are asked to :meth:`recognize` in this order."""
    metrics_off_statuses: ClassVar[tuple[int, ...]] = ()
    """``/metrics`` statuses that mean the server runs without metrics."""
    metrics_off_text: ClassVar[str] = ""
    """The reason shown when metrics are off."""
    stream_in_bursts: ClassVar[bool] = False
    """Events of one verify step arrive as a burst (one event per token), not one chunk."""
    metrics_path: ClassVar[str] = "/metrics"
    """Where the Prometheus text is (TensorRT-LLM: ``/prometheus/metrics``; its ``/metrics``
    is JSON drained on read and never asked)."""
    wanted_families: ClassVar[tuple[str, ...]] = ()
    """``/metrics`` family names or name prefixes the live watch reads; the rest of a scrape is
    skipped unparsed. Empty: keep everything."""
    metrics_prefix: ClassVar[str] = ""
    """The prefix of this server's own ``/metrics`` series (``vllm:``); empty when it has none.
    It names the server when ``/v1/models`` wants an API key that the metrics do not."""

    async def recognize(self, client: ServerClient) -> bool:
        """Whether endpoints only this server has answer (used when ``owned_by`` is generic)."""
        return False

    @abc.abstractmethod
    async def detect(
        self, client: ServerClient, model: str | None, max_len: int | None
    ) -> ServerInfo:
        """Version, model, speculative setup and metrics state of a server of this dialect.

        Raises:
            ServerError: The server cannot be reached or is still loading.
        """

    def metrics_off_reason(self, status: int) -> str | None:
        """Why a ``/metrics`` status means metrics are off; ``None`` when it does not."""
        return self.metrics_off_text if status in self.metrics_off_statuses else None

    async def metrics_state(
        self, client: ServerClient, off_by_config: bool
    ) -> tuple[bool | None, str | None, Scrape | None]:
        """``(metrics_enabled, metrics_reason, scrape)``; no request when the config says off."""
        if off_by_config:
            return False, self.metrics_off_text, None
        status, scrape, detail = await scrape_metrics(client, self.metrics_path)
        reason = self.metrics_off_reason(status)
        if reason is not None:
            return False, reason, None
        if scrape is None:
            return None, detail, None
        return True, None, scrape

    async def side_figures(
        self, client: ServerClient, info: ServerInfo, scrape: Scrape
    ) -> dict[str, tuple[float, str]]:
        """Window fields ``/metrics`` lacks that a passive info endpoint gives, as
        ``name -> (value, source)``; asked at most every :data:`SIDE_EVERY_S` seconds, and never
        of an endpoint that makes the server do model work. None by default."""
        return {}

    async def progress(
        self, client: ServerClient, info: ServerInfo, last: Any, scrape: Scrape | None
    ) -> Any:
        """What the server says of the requests it is running, read at every scrape just before
        ``/metrics`` and handed to :meth:`derive_window` beside it (``WindowBuilder.progress``):
        for servers whose counters move only when a request ends. ``last`` is the previous
        answer, ``scrape`` the last good scrape (``None`` before the first). One bounded,
        passive request at most; none by default."""
        return None

    async def progress_after(
        self, client: ServerClient, info: ServerInfo, progress: Any, scrape: Scrape
    ) -> Any:
        """``progress`` completed after the scrape it goes with, where that scrape shows what
        the read before it left out; as it was by default (no request)."""
        return progress

    def scrape_notes(self, scrape: Scrape) -> dict[str, str]:
        """Notes a scrape deserves before any number is derived (e.g. no series of ours)."""
        return {}

    @abc.abstractmethod
    def derive_window(
        self, b: WindowBuilder, cur: Scrape, prev: Scrape | None, dt: float, info: ServerInfo
    ) -> None:
        """Fill ``b`` from the current scrape and the one ``dt`` seconds before (or none)."""

    @abc.abstractmethod
    def stream_plan(self, info: ServerInfo, request: StreamRequest) -> StreamPlan:
        """The requests that stream ``request`` on this server."""

    @abc.abstractmethod
    def parse_chunk(self, acc: StreamAccumulator, obj: Mapping[str, Any], t: float) -> None:
        """Read one decoded stream event that arrived at clock time ``t`` into ``acc``."""

    def server_decode_steps(self, stats: Mapping[str, Any]) -> int | None:
        """The decode-step count the server reported for a bursty stream, if any."""
        return decode_steps(stats) if self.stream_in_bursts else None

    def step_note(self) -> str | None:
        """How steps are counted when each chunk is one engine step (``None``: bursts)."""
        return None

    def spec_figures(
        self, info: ServerInfo, stats: dict[str, Any], completion: int, notes: dict[str, str]
    ) -> tuple[float | None, float | None]:
        """The server's own per-request accept length and draft acceptance rate."""
        if "timings" in stats:
            return spec_from_timings(stats, notes)
        spec = stats.get("speculative_decoding")
        if isinstance(spec, Mapping):
            return as_float(spec.get("mean_acceptance_length")), as_float(
                spec.get("draft_acceptance_rate")
            )
        self.no_spec_stats(notes)
        return None, None

    def no_spec_stats(self, notes: dict[str, str]) -> None:
        """Say why a stream carried no speculative stats."""
        notes.setdefault("draft_acceptance_rate", "the server reports no speculative stats")
        notes.setdefault("accept_length", "the server reports no speculative stats")

    def accept_length_from_counters(self, deltas: Mapping[str, float]) -> float | None:
        """Tokens per verify step from counter deltas over a run, bonus token included."""
        return None


@functools.cache
def all_dialects() -> tuple[ServerDialect, ...]:
    """Every dialect, in the order they are asked to recognise a server."""
    found: list[ServerDialect] = []
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = importlib.import_module(f"{__package__}.{info.name}")
        dialect = getattr(module, "DIALECT", None)
        if isinstance(dialect, ServerDialect):
            found.append(dialect)
    return tuple(sorted(found, key=lambda d: (d.fingerprint_order, d.dialect.value)))


def dialect_for(dialect: Dialect) -> ServerDialect:
    """The module that speaks ``dialect``.

    Raises:
        KeyError: No module speaks it.
    """
    for candidate in all_dialects():
        if candidate.dialect is dialect:
            return candidate
    raise KeyError(f"no module in specwatch.sources.dialects speaks {dialect.value}")


def dialect_owning(owner: str) -> ServerDialect | None:
    """The dialect a ``/v1/models`` ``owned_by`` value names, if any."""
    owner = owner.lower()
    for candidate in all_dialects():
        if owner in candidate.owned_by:
            return candidate
    return None


# --- deriving one window ---------------------------------------------------------------------

QUANTILES = (0.5, 0.9, 0.99)
"""The step-latency quantiles a window carries."""
CDF_KEYS = ("ttft", "tpot")
"""The latency histograms whose bucket counts a window keeps whole (goodput reads them)."""


@dataclass(slots=True)
class WindowBuilder:
    """Collects the fields of one :class:`~specwatch.core.server.MetricsWindow`."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    progress: Any = None
    """The dialect's :meth:`~specwatch.sources.dialects.base.ServerDialect.progress` answer read
    with this scrape (``None``: none read)."""
    prev_progress: Any = None
    """The same, read with the window's first scrape."""

    def set(self, name: str, value: Any, source: str) -> bool:
        """Set ``name`` from ``source``; ``None`` and non-finite values are left out (``False``)."""
        if value is None:
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        self.values[name] = value
        self.sources[name] = source
        return True

    def note(self, name: str, text: str) -> None:
        """Say why ``name`` is missing, unless it is set or already explained."""
        if name not in self.values:
            self.notes.setdefault(name, text)


def delta(cur: Scrape, prev: Scrape, name: str, where: LabelMatch | None = None) -> float | None:
    """``cur − prev`` of a summed counter (``None`` when ``cur`` lacks it)."""
    now = cur.total(name, where)
    before = prev.total(name, where)
    if now is None:
        return None
    return now - (before or 0.0)


def hist_delta(cur: Scrape, prev: Scrape | None, name: str) -> Histogram | None:
    """The histogram of observations made between the two scrapes."""
    now = cur.histogram(name)
    if now is None or prev is None:
        return None
    before = prev.histogram(name)
    return now if before is None else now.minus(before)


def ratio(num: float | None, den: float | None) -> float | None:
    """``num / den``, or ``None`` when either is missing or ``den <= 0``."""
    if num is None or den is None or den <= 0:
        return None
    return num / den


def plus_one(x: float | None) -> float | None:
    """``1 + x`` (the bonus token of a verify step), ``None`` stays ``None``."""
    return None if x is None else 1.0 + x


def minus(a: float | None, c: float | None) -> float | None:
    """``a − c`` with a missing ``c`` read as 0."""
    if a is None:
        return None
    return a - (c or 0.0)


def set_latency_quantiles(b: WindowBuilder, hist: Histogram, source: str) -> None:
    """Step-latency p50/p90/p99 from a histogram of step latencies, and the buckets holding
    them (``latency_buckets["step"]``: what the screen shows, since a point interpolated inside
    a bucket can contradict the mean)."""
    names = ("step_latency_p50_s", "step_latency_p90_s", "step_latency_p99_s")
    for q, name in zip(QUANTILES, names, strict=True):
        b.set(name, hist.quantile(q), f"{source} bucket deltas, q={q:g}, interpolated in bucket")
    found = tuple(x for x in (bucket_of(hist, q) for q in QUANTILES) if x is not None)
    if found:
        b.values.setdefault("latency_buckets", {})["step"] = found
        b.sources["latency_buckets.step"] = f"Δ{source} buckets: the bucket holding each q"


def bucket_of(hist: Histogram, q: float) -> LatencyBucket | None:
    """The bucket the ``q`` quantile falls in (``None`` with no observations)."""
    total = hist.buckets[-1][1] if hist.buckets else 0.0
    if total <= 0:
        return None
    low = 0.0
    for le, cumulative in hist.buckets:
        if cumulative >= q * total:
            return LatencyBucket(q, low, le)
        low = le
    return None


def set_load(
    b: WindowBuilder,
    cur: Scrape,
    prev: Scrape,
    dt: float,
    prefix: str,
    latency: Mapping[str, str],
) -> None:
    """Prompt tok/s, requests/s and the latency buckets (TTFT, TPOT, e2e) over the window.

    ``latency`` maps ``"ttft"``/``"tpot"``/``"e2e"`` to the histogram's name.
    """
    prompt = prefix + "prompt_tokens_total"
    b.set("prompt_tok_s", ratio(delta(cur, prev, prompt), dt), f"Δ{prompt} / Δt")
    buckets: dict[str, tuple[LatencyBucket, ...]] = {}
    for key, name in latency.items():
        hist = hist_delta(cur, prev, name)
        if hist is None:
            continue
        if key == "e2e":
            b.set("requests_per_s", ratio(hist.count, dt), f"Δ{name}_count / Δt")
        if key in CDF_KEYS and hist.count > 0:
            b.values.setdefault("latency_cdf", {})[key] = hist.buckets
            b.sources[f"latency_cdf.{key}"] = f"Δ{name} buckets (cumulative)"
        found = tuple(x for x in (bucket_of(hist, q) for q in QUANTILES) if x is not None)
        if found:
            buckets[key] = found
            b.sources[f"latency_buckets.{key}"] = f"Δ{name} buckets: the bucket holding each q"
    if buckets:
        b.values.setdefault("latency_buckets", {}).update(buckets)


def spec_names(prefix: str) -> tuple[str, str, str]:
    """Accepted-token, draft and draft-token counters (llama.cpp copied vLLM's names)."""
    return (
        prefix + "spec_decode_num_accepted_tokens_total",
        prefix + "spec_decode_num_drafts_total",
        prefix + "spec_decode_num_draft_tokens_total",
    )


def spec_lifetime(b: WindowBuilder, cur: Scrape, prefix: str) -> bool:
    """Set the since-start accept length and rate; ``False`` when there are no spec counters."""
    acc_name, drafts_name, dtok_name = spec_names(prefix)
    if not (cur.has(drafts_name) or cur.has(acc_name)):
        return False
    b.set(
        "lifetime_accept_length",
        plus_one(ratio(cur.total(acc_name), cur.total(drafts_name))),
        f"1 + {acc_name} / {drafts_name} (since start)",
    )
    b.set(
        "lifetime_acceptance_rate",
        ratio(cur.total(acc_name), cur.total(dtok_name)),
        f"{acc_name} / {dtok_name} (since start)",
    )
    return True


def spec_window(b: WindowBuilder, cur: Scrape, prev: Scrape, prefix: str) -> float:
    """Set the windowed accept length, rate and per-position rates; returns Δdrafts.

    Nothing is set when no draft was made in the window (Δdrafts <= 0).
    """
    acc_name, drafts_name, dtok_name = spec_names(prefix)
    drafts = delta(cur, prev, drafts_name) or 0.0
    if drafts <= 0:
        return drafts
    acc = delta(cur, prev, acc_name) or 0.0
    dtoks = delta(cur, prev, dtok_name) or 0.0
    b.set("accept_length", plus_one(ratio(acc, drafts)), f"1 + Δ{acc_name} / Δ{drafts_name}")
    b.set("draft_acceptance_rate", ratio(acc, dtoks), f"Δ{acc_name} / Δ{dtok_name}")
    b.set("spec_drafts", drafts, f"Δ{drafts_name}")
    per_pos = prefix + "spec_decode_num_accepted_tokens_per_pos_total"
    now = cur.by_label(per_pos, "position")
    if now:
        before = prev.by_label(per_pos, "position")
        ordered = sorted(now, key=lambda p: int(p) if p.isdigit() else 1 << 30)
        counts = tuple(now[p] - before.get(p, 0.0) for p in ordered)
        b.set("spec_accepted_per_pos", counts, f"Δ{per_pos}{{position}}")
        b.set(
            "per_position_acceptance",
            tuple(c / drafts for c in counts),
            f"Δ{per_pos}{{position}} / Δ{drafts_name}",
        )
    return drafts


def set_tokens_per_step(b: WindowBuilder) -> None:
    """``tokens_per_step`` where the dialect counted the window's decode steps: one token each,
    plus the drafts accepted (``(accept length − 1) × drafts``), over every step, drafted or not.
    A step count below the drafts comes from counters of different requests: left out then."""
    steps = b.values.get("decode_steps")
    drafts = b.values.get("spec_drafts") or 0.0
    length = b.values.get("accept_length")
    if not steps or steps <= 0 or drafts > steps:
        return
    if drafts > 0 and length is None:
        return
    accepted = 0.0 if length is None else (length - 1.0) * drafts
    b.set(
        "tokens_per_step",
        1.0 + accepted / steps,
        "1 + accepted drafts / decode steps, with a draft or not "
        f"(accepted = (accept length − 1) × {b.sources.get('spec_drafts', 'drafts')})",
    )


def accept_length_from(
    deltas: Mapping[str, float], num: str, den: str, offset: float, minus_name: str = ""
) -> float | None:
    """``offset + (Δnum − Δminus_name) / Δden`` from counter deltas over a run."""
    top, bottom = deltas.get(num), deltas.get(den)
    if top is None or not bottom:
        return None
    if minus_name:
        top -= deltas.get(minus_name, 0.0)
    return offset + top / bottom


def set_largest_context(b: WindowBuilder, cur: Scrape, prompt: str, generation: str) -> None:
    """Bounds on the largest request's context from the since-start prompt and generation
    token histograms: no request had more than both top occupied buckets' upper bounds, and
    the request in each top bucket had more than its lower bound."""
    hp, hg = cur.histogram(prompt), cur.histogram(generation)
    p = None if hp is None else bucket_of(hp, 1.0)
    g = None if hg is None else bucket_of(hg, 1.0)
    if p is None or g is None:
        return
    b.values["largest_context"] = LatencyBucket(1.0, max(p.low, g.low), p.high + g.high)
    b.sources["largest_context"] = (
        f"{prompt} + {generation}: the top occupied buckets since start (a bound)"
    )


__all__ = [
    "ONE_CHUNK_PER_STEP",
    "QUANTILES",
    "SIDE_EVERY_S",
    "ServerDialect",
    "StreamPlan",
    "StreamRequest",
    "WindowBuilder",
    "accept_length_from",
    "all_dialects",
    "bucket_of",
    "delta",
    "dialect_for",
    "dialect_owning",
    "hist_delta",
    "minus",
    "plus_one",
    "ratio",
    "set_largest_context",
    "set_latency_quantiles",
    "set_load",
    "set_tokens_per_step",
    "spec_lifetime",
    "spec_names",
    "spec_window",
]
