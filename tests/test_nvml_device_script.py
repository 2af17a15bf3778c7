"""tests/tools/device_nvml_check.py: the prepared real-GPU check runs cleanly without a GPU."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "tools" / "device_nvml_check.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_reports_unavailable_nvml_clearly_or_passes_on_a_gpu() -> None:
    result = run("--ticks", "1", "--interval", "0.05")
    if result.returncode == 0:
        assert result.stdout.rstrip().endswith("OK")
    else:
        assert result.returncode == 2, result.stderr
        assert "NVML unavailable: " in result.stderr
        assert "Traceback" not in result.stderr


def test_full_check_over_simulated_gpus() -> None:
    result = run("--sim", "2", "--ticks", "3", "--interval", "0.01")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.rstrip().endswith("OK")
    assert "gpu 1 static: index=1 name='Simulated H100 80GB HBM3'" in out
    assert "gpu 0 missing fan_pct: n/s: Not Supported" in out
    assert "tick 2:" in out and "cost per tick:" in out
    assert "nvmlInit: 1," in out and "nvmlDeviceGetName: 2," in out
    assert "summary gpu 1:" in out
    assert "gpu 0 clock policy: unlocked (boost) (flag -)" in out
    assert "gpu 1 nvmlDeviceGetDefaultApplicationsClock(2,): 2619" in out
    assert "gpu 1 nvmlDeviceGetMaxClockInfo(2,): 2619" in out
    assert "gpu 1 lock target max (SM, memory MHz): (1980, 2619)" in out
    assert "gpu 0 missing dram_active: N/A: GPM needs two samples" in out  # the first tick
    assert re.search(r"gpu 1 GPM DRAM BW util over 0.2 s: \d+\.\d\d%", out), out
    assert re.search(r"gpu 0 sampler DRAM activity: 0\.\d+, 0\.\d+", out), out
    assert "nvmlGpmSampleFree: 4," in out  # the sampler's two per GPU, all freed
    assert "Set" not in out  # read-only: no clock is ever set by the check
    assert "slopes over the check: " in out
