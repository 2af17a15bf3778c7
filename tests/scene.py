"""Deterministic, seeded data for snapshot tests and screenshots (no live sources, no clocks).

A cold box warming up under load: the boost clock sags as the GPUs heat, the token rate follows,
one board runs hotter than the others and becomes the straggler. The server loads, warms up,
restarts once and a benchmark runs, so every kind of mark appears on the graph.
"""

from __future__ import annotations

import math
import random

from specwatch.core.gpu import GpuInventory, GpuSample, GpuStatic, GpuTick, SystemInfo
from specwatch.core.server import Dialect, LatencyBucket, MetricsWindow, ServerInfo, SpecConfig
from specwatch.session.live_verdict import LiveVerdict
from specwatch.ui.model import MonitorModel

GIB = 1024**3
MAX_CLOCK = 1980
POWER_LIMIT = 700.0


class JudgedModel(MonitorModel):
    """A model that judges its own readings as the session would (scenes and screenshots fill
    a model without a session, so the verdict line has no session to hear from)."""

    def __init__(self, baseline_ms: float | None = None, baseline_source: str = "") -> None:
        super().__init__(baseline_ms, baseline_source)
        self.judge = LiveVerdict()
        self._judged_version = 0

    def _judged(self) -> None:
        if self.judge.version != self._judged_version:
            self._judged_version = self.judge.version
            self.set_verdict(self.judge.state())

    def set_inventory(self, inventory: GpuInventory) -> None:
        """Record the GPUs; the verdict learns their maximum clocks."""
        super().set_inventory(inventory)
        self.judge.set_inventory(inventory)
        self._judged()

    def add_tick(self, tick: GpuTick) -> None:
        """Take one GPU tick, and judge it."""
        super().add_tick(tick)
        self.judge.add_tick(tick)
        self._judged()

    def set_ready(self, t: float, info: ServerInfo) -> None:
        """The server answered: the verdict's warmup starts."""
        super().set_ready(t, info)
        self.judge.server_ready(t)
        self._judged()

    def add_window(self, w: MetricsWindow) -> None:
        """Take one metrics window, and judge it."""
        super().add_window(w)
        self.judge.add_window(w)
        self._judged()


def scene_inventory(gpus: int = 8) -> GpuInventory:
    """Eight simulated H100s."""
    return GpuInventory(
        available=True,
        system=SystemInfo(
            driver_version="570.124.06", nvml_version="12.570.124.06", cuda_driver_version="12.8"
        ),
        gpus=tuple(
            GpuStatic(
                index=i,
                name="Simulated H100 80GB HBM3",
                max_sm_clock_mhz=MAX_CLOCK,
                max_mem_clock_mhz=2619,
                max_pcie_gen=5,
                max_pcie_width=16,
                slowdown_temp_c=87,
                shutdown_temp_c=92,
                power_limit_w=POWER_LIMIT,
                power_default_limit_w=POWER_LIMIT,
            )
            for i in range(gpus)
        ),
    )


def scene_server(dialect: Dialect = Dialect.SGLANG) -> ServerInfo:
    """An SGLang server running EAGLE-3."""
    return ServerInfo(
        base_url="http://127.0.0.1:30000",
        dialect=dialect,
        version="0.5.23",
        model="sim/Llama-3.1-8B-Instruct",
        spec=SpecConfig(
            enabled=True,
            algorithm="EAGLE3",
            num_steps=3,
            num_draft_tokens=4,
            topk=1,
            source="/server_info",
        ),
        metrics_enabled=True,
    )


def _gpu_sample(i: int, t: float, heat: float, load: float, rng: random.Random) -> GpuSample:
    hot = 1.0 + (0.09 if i == 5 else 0.012 * i)
    temp = 32.0 + heat * 46.0 * hot
    clock = MAX_CLOCK if temp < 55 else MAX_CLOCK - 9.0 * (temp - 55)
    power = 70.0 + load * 690.0 * (clock / MAX_CLOCK) ** 3
    reasons = 0
    if power > POWER_LIMIT:
        clock = MAX_CLOCK * ((POWER_LIMIT - 70.0) / (load * 690.0)) ** (1 / 3)
        power = POWER_LIMIT
        reasons |= 0x004
    if load <= 0:
        clock, power, reasons = 345.0, 70.0, 0x001
    return GpuSample(
        index=i,
        t=t,
        sm_clock_mhz=round(clock + rng.uniform(-3, 3)),
        mem_clock_mhz=2619 if load > 0 else 1593,
        temp_c=round(temp),
        hbm_temp_c=round(temp + 6 * (1 + load)),
        power_w=round(power, 1),
        energy_j=1e6 + t * power,
        pstate=0 if load > 0 else 8,
        clock_event_reasons=reasons,
        util_gpu_pct=round(100 * load),
        util_mem_pct=round(55 * load),
        mem_used_bytes=int(71.3 * GIB),
        mem_total_bytes=80 * GIB,
        pcie_gen=(3 if i == 6 else 5) if load > 0 else 1,
        pcie_width=16,
    )


_TTFT_SHARES = ((0.06, 0.5), (0.1, 0.9), (0.25, 0.99), (0.75, 0.995), (2.5, 1.0), (math.inf, 1.0))
_TPOT_SHARES = ((0.01, 0.5), (0.025, 0.97), (0.05, 0.985), (0.075, 1.0), (math.inf, 1.0))
SCENE_CDF = {
    # 0.8 requests a window; the TTFT objective (1 s) falls between two bounds: shown as a range
    "ttft": tuple((le, 0.8 * f) for le, f in _TTFT_SHARES),
    "tpot": tuple((le, 0.8 * f) for le, f in _TPOT_SHARES),
}
SCENE_LATENCY = {
    "ttft": (
        LatencyBucket(0.5, 0.04, 0.06),
        LatencyBucket(0.9, 0.08, 0.1),
        LatencyBucket(0.99, 0.1, 0.25),
    ),
    "tpot": (
        LatencyBucket(0.5, 0.0, 0.01),
        LatencyBucket(0.9, 0.01, 0.025),
        LatencyBucket(0.99, 0.01, 0.025),
    ),
    "e2e": (
        LatencyBucket(0.5, 4.0, 6.0),
        LatencyBucket(0.9, 6.0, 8.0),
        LatencyBucket(0.99, 10.0, math.inf),
    ),
}
"""Seeded latency buckets: p50/p90/p99 of TTFT, TPOT and end-to-end latency."""


def build_scene(
    model: MonitorModel | None = None,
    seconds: int = 300,
    seed: int = 0,
    with_bench: bool = True,
    gpus: int = 8,
) -> MonitorModel:
    """Fill ``model`` (or a new one) with ``seconds`` of seeded history at 1 s steps."""
    m = model or JudgedModel(baseline_ms=6.8, baseline_source="--baseline-itl")
    rng = random.Random(seed)
    info = scene_server()
    m.set_inventory(scene_inventory(gpus))
    for attempt in range(1, 9):
        m.set_waiting(
            float(attempt), "loading" if attempt > 2 else "refused", attempt, attempt - 1.0, ""
        )
    m.set_ready(9.0, info)
    restart_at = int(seconds * 0.45)
    bench_at = int(seconds * 0.7)
    life_tokens = 0.0
    life_steps = 0.0
    for s in range(10, seconds + 1):
        t = float(s)
        heat = 1.0 - math.exp(-(t - 10.0) / 120.0)
        loading = restart_at <= s < restart_at + 6
        load = 0.0 if loading else 0.92
        samples = tuple(_gpu_sample(i, t, heat, load, rng) for i in range(gpus))
        cost = 0.4 + 0.05 * rng.random()
        m.add_tick(GpuTick(t=t, wall_time=1.7e9 + t, samples=samples, cost_ms=round(cost, 3)))
        if loading:
            if s == restart_at:
                m.set_lost(t, "cannot connect to http://127.0.0.1:30000: connection refused")
            m.set_waiting(t, "loading", s - restart_at + 1, float(s - restart_at), "")
            continue
        if s == restart_at + 6:
            m.set_ready(t, info)
        slowest = min(x.sm_clock_mhz or 0 for x in samples)
        warm = 3.0 if s < 14 or restart_at + 6 <= s < restart_at + 9 else 1.0
        accept = 2.4 + 0.15 * math.sin(t / 23.0) + rng.uniform(-0.05, 0.05)
        step_s = 0.0125 * warm * MAX_CLOCK / max(slowest, 1)
        tok_s = 32.0 * accept / step_s
        life_tokens += tok_s
        life_steps += tok_s / accept
        m.add_window(
            MetricsWindow(
                t=t,
                dt=1.0,
                gen_tok_s=round(tok_s, 1),
                accept_length=round(accept, 3),
                draft_acceptance_rate=round((accept - 1.0) / 3.0, 3),
                per_position_acceptance=(0.81, 0.62, 0.44),
                step_latency_s=step_s,
                step_latency_p50_s=step_s * 0.97,
                step_latency_p90_s=step_s * 1.12,
                step_latency_p99_s=step_s * 1.31,
                cuda_graph_share=1.0,
                itl_s=step_s / accept,
                requests_running=32.0,
                requests_waiting=0.0,
                lifetime_accept_length=round(life_tokens / life_steps, 3),
                lifetime_acceptance_rate=round((life_tokens / life_steps - 1.0) / 3.0, 3),
                restarted=s == restart_at + 7,
                tokens=tok_s,
                prompt_tok_s=round(410.0 + 40.0 * math.sin(t / 17.0), 1),
                requests_per_s=0.8,
                kv_cache_usage=0.42,
                prefix_cache_hit_rate=0.31,
                latency_buckets=SCENE_LATENCY,
                latency_cdf=SCENE_CDF,
                sources={
                    "accept_length": "Δsglang:spec_accept_length (gauge, mean over window)",
                    "draft_acceptance_rate": "(accept_length − 1) / num_steps",
                    "per_position_acceptance": "not in SGLang /metrics: from the sim",
                    "gen_tok_s": "Δsglang:generation_tokens_total / Δt",
                },
            )
        )
        if with_bench and s >= bench_at:
            k = s - bench_at
            if k == 0:
                m.bench_event(t, "started", 0, 2, "warming up", None)
            elif k == 4:
                m.bench_event(t, "warmup_done", 2, 2, "", None)
            elif 6 <= k < 6 + 5 * 8 and (k - 6) % 8 == 0:
                m.bench_event(t, "run_start", (k - 6) // 8 + 1, 5, "", None)
            elif 6 <= k < 6 + 5 * 8 and (k - 6) % 8 == 7:
                m.bench_event(t, "run_done", (k - 6) // 8 + 1, 5, "", round(accept / step_s, 1))
    m.set_monitor_cpu(0.6)
    return m


VERDICT_SCENES = ("reference", "no-change", "gpu", "code", "load")
"""The live verdict's states the snapshot tests and screenshots show."""


def verdict_scene(kind: str) -> LiveVerdict:
    """A live verdict fed seeded readings that end in state ``kind`` (:data:`VERDICT_SCENES`).

    Steady at 800 tok/s on GPUs at their maximum clock, then 30 s of: the same (``no-change``),
    the boost clock 7% lower with no reason set and tok/s 6% lower (``gpu``), tok/s 10% lower at
    the same clock (``code``), or three times the running requests (``load``).
    """
    if kind not in VERDICT_SCENES:
        raise ValueError(f"verdict scene must be one of {', '.join(VERDICT_SCENES)}")
    v = LiveVerdict()
    v.set_inventory(scene_inventory(2))
    v.server_ready(0.0)

    def feed(t0: float, seconds: int, tok_s: float, clock: int, running: float) -> None:
        for i in range(seconds):
            t = t0 + i
            samples = tuple(
                GpuSample(g, t, sm_clock_mhz=clock, clock_event_reasons=0, util_gpu_pct=100)
                for g in range(2)
            )
            v.add_tick(GpuTick(t, t, samples, 0.1))
            wobble = (-1.0) ** i * 0.004 * tok_s
            v.add_window(
                MetricsWindow(
                    t=t,
                    dt=1.0,
                    gen_tok_s=tok_s + wobble,
                    requests_running=running,
                    accept_length=2.5,
                    prompt_tok_s=120.0 * running,
                )
            )

    steady = 12 if kind == "reference" else 37
    feed(1.0, steady, 800.0, MAX_CLOCK, 3.0)
    later = {
        "no-change": (800.0, MAX_CLOCK, 3.0),
        "gpu": (752.0, round(MAX_CLOCK * 0.93), 3.0),
        "code": (720.0, MAX_CLOCK, 3.0),
        "load": (640.0, MAX_CLOCK, 9.0),
    }
    if kind in later:
        feed(1.0 + steady, 30, *later[kind])
    return v
