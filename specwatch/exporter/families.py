"""The exporter's series, built at scrape time from :class:`~specwatch.exporter.readings.View`.

A custom ``prometheus_client`` collector rather than long-lived gauges: every scrape shows
exactly what is known now, so a lost server's figures vanish with it instead of lingering as
last values (the README's series list is this module).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from specwatch import __version__
from specwatch.core.gpu import REASONS, decode
from specwatch.core.host import HostSpan
from specwatch.core.outcomes import CAUSES
from specwatch.core.spec_payoff import break_even_accept_length
from specwatch.exporter.readings import GpuView, ServerView, View, label

PHASES = ("waiting", "warmup", "reference", "idle", "benchmark", "profiling", "judged")
MAX_POSITIONS = 16
"""Per-position acceptance beyond this draft position is not exported (bounded cardinality)."""
SERVER_LABELS = ("server", "model", "dialect")
GPU_LABELS = ("node", "gpu")
MHZ = 1e6


def _gauge(name: str, doc: str, labels: tuple[str, ...]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


class SessionCollector(Collector):
    """Yields the session's series at each scrape.

    Args:
        view: What is known now (:meth:`Readings.view`).
        plain_s: Per-token seconds without speculation (``--baseline-itl``), for the
            break-even accept length and the speculative gain; ``None``: those are absent.
    """

    def __init__(self, view: Callable[[], View], plain_s: float | None = None) -> None:
        self._view = view
        self.plain_s = plain_s

    def collect(self) -> Iterator[Metric]:
        """Every family, built from one consistent view."""
        view = self._view()
        info = InfoMetricFamily("specwatch_exporter", "specwatch's version")
        info.add_metric([], {"version": __version__})
        yield info
        yield from self._servers(view.servers)
        yield from self._gpus(view.gpus)
        yield from self._host(view.host)

    # --- servers --------------------------------------------------------------------------------

    def _servers(self, servers: tuple[ServerView, ...]) -> Iterator[Metric]:
        up = _gauge(
            "specwatch_server_up", "1 while the server answers, 0 while lost", SERVER_LABELS
        )
        errors = CounterMetricFamily(
            "specwatch_source_errors",
            "Failed reads of a source (server: a failed scrape, wait or loss; gpu: a failed tick)",
            labels=["server", "source"],
        )
        last = _gauge(
            "specwatch_source_last_success_timestamp_seconds",
            "Unix time of the newest successful read of a source",
            ("server", "source"),
        )
        late = CounterMetricFamily(
            "specwatch_late_reads",
            "Scrapes of a server read over three intervals late (specwatch short of CPU, or "
            "the server slow to answer): the windowed figures then are means over the span",
            labels=["server"],
        )
        fams: dict[str, GaugeMetricFamily] = {}

        def put(name: str, doc: str, s: ServerView, value: float | None, *extra: str) -> None:
            if value is None:
                return
            keys = SERVER_LABELS + tuple(extra[0::2])
            fam = fams.get(name) or fams.setdefault(name, _gauge(name, doc, keys))
            fam.add_metric([s.server, s.model, s.dialect, *extra[1::2]], value)

        timed = CounterMetricFamily(
            "specwatch_goodput_requests",
            "Requests the server's histograms timed against a goodput objective",
            labels=[*SERVER_LABELS, "objective"],
        )
        met = CounterMetricFamily(
            "specwatch_goodput_met_requests",
            "Of those, the requests that met the objective: at least (bound=low) and at most "
            "(bound=high); equal when the objective is a bucket bound",
            labels=[*SERVER_LABELS, "objective", "bound"],
        )
        counters = _gauge(
            "specwatch_server_counters",
            "1 when the server's /metrics serves the counters specwatch reads; 0 when it is off "
            "(llama-server without --metrics, vLLM with --disable-log-stats): no token rate, "
            "acceptance or verdict then",
            SERVER_LABELS,
        )
        for s in servers:
            up.add_metric([s.server, s.model, s.dialect], 1.0 if s.up else 0.0)
            if s.counters is not None:
                counters.add_metric([s.server, s.model, s.dialect], 1.0 if s.counters else 0.0)
            errors.add_metric([s.server, "server"], s.errors)
            late.add_metric([s.server], s.late_reads)
            if s.last_success is not None:
                last.add_metric([s.server, "server"], s.last_success)
            for g in s.goodput:
                keys = [s.server, s.model, s.dialect, g.objective]
                timed.add_metric(keys, g.requests)
                met.add_metric([*keys, "low"], g.met_low)
                met.add_metric([*keys, "high"], g.met_high)
                put(
                    "specwatch_goodput_objective_seconds",
                    "A goodput objective (--slo-ttft, --slo-tpot)",
                    s,
                    g.limit_s,
                    "objective",
                    g.objective,
                )
            self._window(s, put)
            self._verdict(s, put)
        yield up
        yield counters
        yield errors
        yield last
        yield late
        yield timed
        yield met
        yield from fams.values()

    def _window(self, s: ServerView, put: _Put) -> None:
        w = s.window
        if w is None:
            return
        put("specwatch_generation_tokens_per_second", "Windowed generated tok/s", s, w.gen_tok_s)
        put(
            "specwatch_accept_length",
            "Windowed tokens per drafted verify step (1 + accepted / drafts)",
            s,
            w.accept_length,
        )
        put(
            "specwatch_tokens_per_step",
            "Windowed tokens per decode step, with a draft or not",
            s,
            w.step_tokens,
        )
        put(
            "specwatch_draft_acceptance_rate",
            "Windowed accepted / proposed draft tokens",
            s,
            w.draft_acceptance_rate,
        )
        for i, rate in enumerate((w.per_position_acceptance or ())[:MAX_POSITIONS]):
            put(
                "specwatch_position_acceptance_rate",
                "Windowed acceptance at each draft position",
                s,
                rate,
                "position",
                str(i),
            )
        step = w.step_latency_s
        put("specwatch_verify_step_seconds", "Windowed mean verify (decode) step", s, step)
        length = w.step_tokens
        eff = step / length if step and length and step > 0 and length > 0 else None
        put("specwatch_effective_token_seconds", "Verify step / tokens per step", s, eff)
        plain = self.plain_s
        put(
            "specwatch_break_even_accept_length",
            "Tokens per step at which speculation matches plain decoding",
            s,
            break_even_accept_length(step, plain),
        )
        put(
            "specwatch_speculative_gain_ratio",
            "Plain per-token time / effective per-token time (below 1: speculation costs)",
            s,
            plain / eff if plain and eff else None,
        )
        put("specwatch_requests_running", "Requests running", s, w.requests_running)
        self._energy(s, put)

    def _energy(self, s: ServerView, put: _Put) -> None:
        e = s.energy
        if e is None:
            return
        what = "over the window, GPU power summed over every GPU read"
        put(
            "specwatch_tokens_per_joule",
            f"Generated tokens per joule {what}",
            s,
            e.tokens_per_joule,
        )
        put(
            "specwatch_joules_per_token",
            f"Joules per generated token {what}",
            s,
            e.joules_per_token,
        )
        put("specwatch_energy_gpu_power_watts", f"Mean power {what}", s, e.power_w)
        rejected = e.rejected_joules
        put(
            "specwatch_rejected_draft_power_watts",
            "Power spent on rejected draft positions: rejected / (drafted + 1) of a verify step",
            s,
            None if rejected is None or e.seconds <= 0 else rejected / e.seconds,
        )

    def _verdict(self, s: ServerView, put: _Put) -> None:
        state = s.verdict
        if state is None:
            return
        outcome = state.outcome
        for o, cause in CAUSES.items():
            put(
                "specwatch_verdict",
                "The live verdict: 1 for the current cause, 0 for the others",
                s,
                1.0 if o is outcome else 0.0,
                "cause",
                cause,
            )
        for phase in PHASES:
            put(
                "specwatch_verdict_phase",
                "The live verdict's phase: 1 for the current one",
                s,
                1.0 if phase == state.phase else 0.0,
                "phase",
                phase,
            )
        ref = state.reference.figures if state.reference is not None else None
        cur = state.current
        if ref is None or cur is None:
            return
        ref_tok, cur_tok = ref.mean_tok_s, cur.mean_tok_s
        put("specwatch_reference_tokens_per_second", "The reference's mean tok/s", s, ref_tok)
        put(
            "specwatch_tokens_per_second_ratio",
            "Current / reference mean tok/s (the verdict's window)",
            s,
            cur_tok / ref_tok if cur_tok is not None and ref_tok else None,
        )
        clock_a, clock_b = ref.slowest_sm_clock_mhz, cur.slowest_sm_clock_mhz
        put(
            "specwatch_clock_predicted_ratio",
            "tok/s ratio the slowest busy GPU's SM clock predicts (current / reference clock)",
            s,
            clock_b / clock_a if clock_a and clock_b is not None else None,
        )
        put(
            "specwatch_reference_accept_length",
            "The reference's accept length",
            s,
            ref.accept_length,
        )

    # --- GPUs -----------------------------------------------------------------------------------

    def _gpus(self, g: GpuView) -> Iterator[Metric]:
        errors = CounterMetricFamily(
            "specwatch_gpu_source_errors", "Failed GPU reads (ticks with an error)", labels=[]
        )
        errors.add_metric([], g.errors)
        yield errors
        if g.last_success is not None:
            last = _gauge(
                "specwatch_gpu_last_success_timestamp_seconds",
                "Unix time of the newest GPU tick without error",
                (),
            )
            last.add_metric([], g.last_success)
            yield last
        if g.tick is None:
            return
        statics = {s.index: s for s in (g.inventory.gpus if g.inventory else ())}
        origin = g.inventory.origin if g.inventory else None
        nodes = origin.nodes if origin else ()
        fams: dict[str, GaugeMetricFamily] = {}

        def put(name: str, doc: str, keys: list[str], value: float | None) -> None:
            if value is None:
                return
            fam = fams.get(name)
            if fam is None:
                extra = ("reason",) if len(keys) > len(GPU_LABELS) else ()
                fam = fams.setdefault(name, _gauge(name, doc, GPU_LABELS + extra))
            fam.add_metric(keys, value)

        slowest: tuple[float, list[str]] | None = None
        for sample in g.tick.samples:
            if sample.lost:
                continue
            node = nodes[sample.index] if sample.index < len(nodes) else None
            keys = [node or "", str(sample.index)]
            static = statics.get(sample.index)
            top = static.max_sm_clock_mhz if static else None
            clock = sample.sm_clock_mhz
            put("specwatch_gpu_sm_clock_hertz", "SM clock", keys, _hz(clock))
            put("specwatch_gpu_max_sm_clock_hertz", "Maximum SM clock", keys, _hz(top))
            put("specwatch_gpu_temperature_celsius", "GPU temperature", keys, sample.temp_c)
            put("specwatch_gpu_power_watts", "Power draw", keys, sample.power_w)
            limit = static.power_limit_w if static else None
            put("specwatch_gpu_power_limit_watts", "Enforced power limit", keys, limit)
            util = sample.util_gpu_pct
            put("specwatch_gpu_utilization_ratio", "GPU busy share", keys, _ratio(util))
            put(
                "specwatch_gpu_dram_active_ratio",
                "Share of cycles the memory interface was busy (DCGM_FI_PROF_DRAM_ACTIVE)",
                keys,
                sample.dram_active,
            )
            put(
                "specwatch_gpu_tensor_active_ratio",
                "Share of cycles a tensor pipe was busy (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)",
                keys,
                sample.tensor_active,
            )
            active = {r.name for r in decode(sample.clock_event_reasons)}
            if sample.clock_event_reasons is not None:
                for r in REASONS:
                    on = 1.0 if r.name in active else 0.0
                    put(
                        "specwatch_gpu_clock_event_reason",
                        "1 while a clock-event (throttle) reason is set",
                        [*keys, r.name],
                        on,
                    )
            for kind, ns in (
                ("power", sample.power_violation_ns),
                ("thermal", sample.thermal_violation_ns),
            ):
                put(
                    "specwatch_gpu_throttle_seconds",
                    "Seconds throttled since driver load (rate(): the throttled share)",
                    [*keys, kind],
                    ns / 1e9 if ns is not None else None,
                )
            if util and clock is not None and top:
                share = clock / top
                if slowest is None or share < slowest[0]:
                    slowest = (share, keys)
        if slowest is not None:
            put(
                "specwatch_gpu_straggler_clock_ratio",
                "SM clock / maximum of the slowest busy GPU (the one series is that GPU)",
                slowest[1],
                slowest[0],
            )
        yield from fams.values()

    # --- host -----------------------------------------------------------------------------------

    def _host(self, h: HostSpan | None) -> Iterator[Metric]:
        if h is None:
            return
        for name, doc, value in (
            (
                "specwatch_host_load_per_core",
                "One-minute load average over the cores",
                h.load_per_core,
            ),
            ("specwatch_host_run_queue_per_core", "Runnable tasks per core", h.run_queue_per_core),
            ("specwatch_host_cpu_busy_ratio", "Share of all cores' time busy", h.busy_ratio),
            (
                "specwatch_host_cpu_steal_ratio",
                "Share of CPU time the hypervisor took",
                h.steal_ratio,
            ),
            ("specwatch_host_cpu_frequency_hertz", "Mean core frequency", _hz(h.freq_mhz)),
            ("specwatch_host_cores", "Cores of this host", h.cores),
            ("specwatch_server_cpu_cores", "Cores the server's processes used", h.server_cpu_cores),
            (
                "specwatch_server_cpu_wait_ratio",
                "Share of its runnable time the server's threads waited for a CPU",
                h.server_wait_ratio,
            ),
            ("specwatch_host_others_cpu_cores", "Busy cores less the server's", h.others_cores),
        ):
            if value is not None:
                fam = _gauge(name, doc, ())
                fam.add_metric([], float(value))
                yield fam
        if h.competitors:
            fam = _gauge(
                "specwatch_host_competitor_cpu_cores",
                "Cores used by the processes that used most CPU beside the server (at most 3)",
                ("process", "pid"),
            )
            for c in h.competitors:
                fam.add_metric([label(c.name), str(c.pid)], c.cores)
            yield fam


_Put = Callable[..., None]


def _hz(mhz: float | None) -> float | None:
    return mhz * MHZ if mhz is not None else None


def _ratio(pct: float | None) -> float | None:
    return pct / 100.0 if pct is not None else None


__all__ = ["CAUSES", "MAX_POSITIONS", "PHASES", "SessionCollector"]
