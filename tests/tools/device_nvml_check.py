#!/usr/bin/env python3
"""Check the GPU sampler against the real NVML on a machine with NVIDIA GPUs.

Opens NVML through ``GpuSampler`` (wrapped to count calls), runs the background thread for a
few ticks, and prints every static and sampled field per GPU, every ``missing`` reason, the
cost per tick and per NVML function, and a run summary. Exit status: 0 when the checks pass,
1 when a check fails, 2 when NVML is unavailable (no driver).

    .venv/bin/python tests/tools/device_nvml_check.py [--ticks 5] [--interval 1.0]

``--sim N`` runs the same checks over N simulated GPUs (FakeNvml) to test the script itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import queue
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Runs from a plain checkout too (no install needed on a fresh device machine).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specwatch.core.clocks import policy_of
from specwatch.core.gpu import GpuInventory, GpuTick, short_names
from specwatch.core.gpu_summary import summarize_ticks
from specwatch.core.steady import window_slopes
from specwatch.core.values import to_jsonable
from specwatch.sources.nvml import binding as N
from specwatch.sources.nvml.binding import VALUE_ATTR, CountingNvml
from specwatch.sources.nvml.clock_lock import target_clocks
from specwatch.sources.nvml.sampler import GpuSampler

FIELD_VS_CLASSIC: tuple[tuple[str, int, str | None, tuple[Any, ...], Callable[[Any], int]], ...] = (
    # (name, field id, classic function, its arguments after the handle, how to read it)
    ("power mW", N.FI_DEV_POWER_INSTANT, "nvmlDeviceGetPowerUsage", (), int),
    (
        "energy mJ",
        N.FI_DEV_TOTAL_ENERGY_CONSUMPTION,
        "nvmlDeviceGetTotalEnergyConsumption",
        (),
        int,
    ),
    (
        "power violation ns",
        N.FI_DEV_PERF_POLICY_POWER,
        "nvmlDeviceGetViolationStatus",
        (N.PERF_POLICY_POWER,),
        lambda v: int(v.violationTime),
    ),
    (
        "thermal violation ns",
        N.FI_DEV_PERF_POLICY_THERMAL,
        "nvmlDeviceGetViolationStatus",
        (N.PERF_POLICY_THERMAL,),
        lambda v: int(v.violationTime),
    ),
    ("memory temp C", N.FI_DEV_MEMORY_TEMP, None, (), int),
)

STATIC_ONCE = (
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPowerManagementDefaultLimit",
)


def fields(obj: object) -> str:
    """Every dataclass field but ``missing`` as ``name=value`` pairs."""
    pairs = []
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        if f.name != "missing":
            pairs.append(f"{f.name}={getattr(obj, f.name)!r}")
    return " ".join(pairs)


def compare_fields(nv: Any, gpus: int) -> None:
    """Print each field value the sampler reads next to the classic call it replaces."""
    for index in range(gpus):
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        try:
            values = nv.nvmlDeviceGetFieldValues(handle, [f[1] for f in FIELD_VS_CLASSIC])
        except Exception as exc:
            print(f"gpu {index} nvmlDeviceGetFieldValues: {N.describe(exc)}")
            continue
        for (name, field_id, function, args, read), fv in zip(
            FIELD_VS_CLASSIC, values, strict=True
        ):
            if fv.nvmlReturn != N.SUCCESS:
                field_text = f"{N.error_text(fv.nvmlReturn)} (code {fv.nvmlReturn})"
            else:
                attr = VALUE_ATTR.get(fv.valueType)
                number = getattr(fv.value, attr) if attr else None
                field_text = f"{number!r} (value type {fv.valueType})"
            classic = "-"
            if function is not None:
                try:
                    classic = repr(read(getattr(nv, function)(handle, *args)))
                except Exception as exc:
                    classic = N.describe(exc)
            print(f"gpu {index} field {field_id} {name}: {field_text}; classic: {classic}")


POLICY_READS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    # Read-only: the calls behind the clock policy (never a Set/Reset call here).
    ("nvmlDeviceGetPersistenceMode", ()),
    ("nvmlDeviceGetApplicationsClock", (N.CLOCK_SM,)),
    ("nvmlDeviceGetApplicationsClock", (N.CLOCK_MEM,)),
    ("nvmlDeviceGetDefaultApplicationsClock", (N.CLOCK_SM,)),
    ("nvmlDeviceGetDefaultApplicationsClock", (N.CLOCK_MEM,)),
    ("nvmlDeviceGetPowerManagementLimit", ()),
    ("nvmlDeviceGetEnforcedPowerLimit", ()),
    ("nvmlDeviceGetPowerManagementDefaultLimit", ()),
    ("nvmlGpmQueryDeviceSupport", ()),
    # Read-only: what --lock-clocks max locks the memory clock at, and the bus width that turns
    # DRAM activity x memory clock into bytes per second (bus/8 x MHz x 2 per transfer).
    ("nvmlDeviceGetMaxClockInfo", (N.CLOCK_MEM,)),
    ("nvmlDeviceGetMemoryBusWidth", ()),
)


def policy_report(nv: Any, inventory: GpuInventory) -> None:
    """Each GPU's clock policy as specwatch reads it, and the raw policy calls beside it."""
    for static in inventory.gpus:
        policy = policy_of(static)
        print(f"gpu {static.index} clock policy: {policy.text()} (flag {policy.flag or '-'})")
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(static.index)
        except Exception as exc:
            print(f"gpu {static.index} policy calls: no handle: {N.describe(exc)}")
            continue
        for name, args in POLICY_READS:
            fn = getattr(nv, name, None)
            if fn is None:
                print(f"gpu {static.index} {name}{args}: not in this NVML binding")
                continue
            try:
                value = fn(handle, *args)
                text = fields(value) if dataclasses.is_dataclass(value) else repr(value)
                if hasattr(value, "isSupportedDevice"):
                    text = f"isSupportedDevice={value.isSupportedDevice}"
            except Exception as exc:
                text = N.describe(exc)
            print(f"gpu {static.index} {name}{args}: {text}")
        for target in ("base", "max"):
            # What bench --lock-clocks would lock at, computed without setting anything.
            try:
                text = repr(target_clocks(nv, handle, target))
            except Exception as exc:
                text = N.describe(exc)
            print(f"gpu {static.index} lock target {target} (SM, memory MHz): {text}")


def gpm_report(nv: Any, gpus: int, interval_s: float) -> dict[int, bool]:
    """Read GPM's DRAM bandwidth utilisation read-only: two samples ``interval_s`` apart.

    Returns:
        GPU index -> whether it has GPM (what the sampler's ticks are then checked against).
    """
    supported: dict[int, bool] = {}
    for index in range(gpus):
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            support = nv.nvmlGpmQueryDeviceSupport(handle)
        except Exception as exc:
            print(f"gpu {index} GPM: support query: {N.describe(exc)}")
            supported[index] = False
            continue
        supported[index] = bool(support.isSupportedDevice)
        if not support.isSupportedDevice:
            print(f"gpu {index} GPM: not supported on this GPU (isSupportedDevice=0)")
            continue
        samples: list[Any] = []
        try:
            samples = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
            started = time.perf_counter()
            nv.nvmlGpmSampleGet(handle, samples[0])
            get_ms = (time.perf_counter() - started) * 1000
            # A measurement interval between the two counter samples, not a synchronisation.
            time.sleep(interval_s)
            nv.nvmlGpmSampleGet(handle, samples[1])
            get = nv.c_nvmlGpmMetricsGet_t()
            get.version = N.GPM_METRICS_GET_VERSION
            get.numMetrics = 1
            get.metrics[0].metricId = N.GPM_METRIC_DRAM_BW_UTIL
            get.sample1, get.sample2 = samples
            started = time.perf_counter()
            nv.nvmlGpmMetricsGet(get)
            metrics_ms = (time.perf_counter() - started) * 1000
            metric = get.metrics[0]
            if metric.nvmlReturn != N.SUCCESS:
                text = f"{N.error_text(metric.nvmlReturn)} (code {metric.nvmlReturn})"
            else:
                text = f"{metric.value:.2f}%"
            print(
                f"gpu {index} GPM DRAM BW util over {interval_s:g} s: {text} "
                f"(nvmlGpmSampleGet {get_ms:.3f} ms, nvmlGpmMetricsGet {metrics_ms:.3f} ms)"
            )
        except Exception as exc:
            print(f"gpu {index} GPM: {N.describe(exc)}")
        finally:
            for sample in samples:
                try:
                    nv.nvmlGpmSampleFree(sample)
                except Exception as exc:
                    print(f"gpu {index} GPM: nvmlGpmSampleFree: {N.describe(exc)}")
    return supported


def main(argv: list[str] | None = None) -> int:
    """Run the check; see the module docstring for the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--sim", type=int, metavar="GPUS", help="use simulated GPUs instead")
    args = parser.parse_args(argv)

    inner: object | None = None
    if args.sim:
        from specwatch.sim.fake_nvml import FakeNvml
        from specwatch.sim.gpus import SimGpus, SimGpuSpec

        # A memory-bound decode, so GPM's DRAM bandwidth reads something.
        spec = SimGpuSpec(memory_bound_share=0.8)
        sim_gpus = SimGpus(args.sim, spec=spec, start_t=time.monotonic())
        sim_gpus.advance_to(time.monotonic(), load=1.0)
        inner = FakeNvml(sim_gpus)
    counter = CountingNvml(inner)
    ticks: queue.Queue[GpuTick] = queue.Queue()
    sampler = GpuSampler(interval_s=args.interval, nvml=counter, on_tick=ticks.put)
    inventory = sampler.open()
    if not inventory.available:
        print(f"device_nvml_check: {inventory.reason}", file=sys.stderr)
        sampler.stop()
        return 2
    print(f"system: {fields(inventory.system)}")
    print(f"open: {sampler.open_cost_ms:.1f} ms; {len(inventory.gpus)} GPU(s)")
    if inventory.reason:
        print(f"note: {inventory.reason}")
    for static in inventory.gpus:
        print(f"gpu {static.index} static: {fields(static)}")
        for name, reason in static.missing.items():
            print(f"gpu {static.index} static missing {name}: {reason}")

    # The sampler reads these through nvmlDeviceGetFieldValues: show them beside the classic
    # calls they replace (units and counters should agree).
    # Uncounted, so that the call-count checks below see the sampler's calls only.
    compare_fields(N.real_nvml() if inner is None else inner, len(inventory.gpus))
    policy_report(N.real_nvml() if inner is None else inner, inventory)
    gpm = gpm_report(N.real_nvml() if inner is None else inner, len(inventory.gpus), 0.2)
    problems: list[str] = []
    got: list[GpuTick] = []
    sampler.start()
    try:
        for _ in range(args.ticks):
            got.append(ticks.get(timeout=args.interval * 3 + 30))
    except queue.Empty:
        print("PROBLEM: the sampler thread stopped delivering ticks", file=sys.stderr)
    finally:
        sampler.stop()

    for n, tick in enumerate(got):
        print(f"tick {n}: t={tick.t:.3f} cost={tick.cost_ms:.2f} ms error={tick.error}")
        for s in tick.samples:
            print(f"  gpu {s.index}: {fields(s)} reasons=[{short_names(s.clock_event_reasons)}]")
            for name, reason in s.missing.items():
                print(f"  gpu {s.index} missing {name}: {reason}")
    if got:
        costs = sorted(t.cost_ms for t in got)
        print(
            f"cost per tick: min {costs[0]:.2f} ms, median {costs[len(costs) // 2]:.2f} ms, "
            f"max {costs[-1]:.2f} ms"
        )
    print("NVML calls (count, mean ms):")
    for name in sorted(counter.calls):
        count = counter.calls[name]
        print(f"  {name}: {count}, {counter.seconds[name] / count * 1000:.3f}")
    for summary in summarize_ticks(got, sampler.inventory or inventory):
        print(f"summary gpu {summary.index}: {to_jsonable(summary)}")

    gpus = len(inventory.gpus)
    if len(got) < args.ticks:
        problems.append(f"only {len(got)} of {args.ticks} ticks arrived")
    if counter.calls.get("nvmlInit") != 1 or counter.calls.get("nvmlShutdown") != 1:
        problems.append("nvmlInit/nvmlShutdown not called exactly once")
    for name in STATIC_ONCE:
        if counter.calls.get(name, 0) > gpus:
            problems.append(f"{name} called {counter.calls[name]} times for {gpus} GPU(s)")
    if gpus and got and counter.calls.get("nvmlDeviceGetFieldValues", 0) < gpus * len(got):
        problems.append("the sampler did not read field values once per GPU per tick")
    if counter.calls.get("nvmlDeviceGetPcieThroughput"):
        problems.append("nvmlDeviceGetPcieThroughput was called on the tick path")
    if any(s.lost for t in got for s in t.samples):
        problems.append("a GPU reported lost")
    if any(t.error for t in got):
        problems.append("a tick carried an error")
    for index, has_gpm in gpm.items():
        drams = [s.dram_active for t in got[1:] for s in t.samples if s.index == index]
        if has_gpm and drams and all(d is None for d in drams):
            problems.append(f"gpu {index} has GPM but the sampler read no DRAM activity")
        if has_gpm and drams and all(d is not None for d in drams):
            print(f"gpu {index} sampler DRAM activity: {', '.join(f'{d:.3f}' for d in drams)}")
    allocs = counter.calls.get("nvmlGpmSampleAlloc", 0)
    if allocs > 2 * gpus or allocs != counter.calls.get("nvmlGpmSampleFree", 0):
        problems.append(f"GPM samples: {allocs} allocated, not two per GPU and all freed")
    if len(got) >= 3:
        slopes = window_slopes(got, got[-1].t, got[-1].t - got[0].t)
        print(f"slopes over the check: {slopes.text() if slopes else 'n/a'}")
    changed = [
        n
        for n in counter.calls
        if n.startswith(("nvmlDeviceSet", "nvmlDeviceReset")) or "Set" in n.removeprefix("nvml")
    ]
    if changed:
        problems.append(f"the sampler changed GPU settings: {', '.join(sorted(changed))}")
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    print("OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
