"""Unbounded work from one hostile answer (issue 28 item 8): a dcgm-exporter of 90,000 GPUs is
cut to the parser's limits with one line, in bounded time and memory (a real child process)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from specwatch.sources.dcgm.parse import MAX_GPUS, MAX_SERIES, parse_dcgm
from tests.child_peak import PEAK_LIMIT_MIB, run_specwatch
from tests.loopback_http import QuietHandler, serving

GPUS = 90_000


def _exposition(gpus: int) -> bytes:
    lines = ["# TYPE DCGM_FI_DEV_SM_CLOCK gauge"]
    lines += [
        f'DCGM_FI_DEV_SM_CLOCK{{gpu="{i}",UUID="GPU-{i}",modelName="H100"}} 1500'
        for i in range(gpus)
    ]
    return ("\n".join(lines) + "\n").encode()


@contextmanager
def answering(body: bytes) -> Iterator[str]:
    """``body`` as every answer of a loopback HTTP server; yields its base URL."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving(Handler) as url:
        yield url


def test_a_90k_gpu_dcgm_answer_is_cut_with_one_line() -> None:
    body = _exposition(GPUS)
    assert len(body) < 8 * 1024 * 1024  # under the fetch limit: the parser must bound it
    with answering(body) as url:
        run = run_specwatch(
            "probe", "--timeout", "5", "--dcgm", f"{url}/metrics", "http://127.0.0.1:9",
            timeout_s=60,
        )  # fmt: skip
    print(
        f"dcgm {GPUS} GPUs: {run.cpu_s:.1f} s CPU, {run.wall_s:.1f} s, peak {run.peak_mib:.0f} MiB"
    )
    notes = [ln for ln in run.text.splitlines() if "taken" in ln]
    assert len(notes) == 1, run.text[-3000:]
    assert f"{GPUS} DCGM series in one answer: the first {MAX_SERIES} taken" in notes[0]
    assert f"the first {MAX_GPUS} taken" in notes[0]
    assert f"gpu {MAX_GPUS - 1} " in run.text and f"gpu {MAX_GPUS} " not in run.text
    assert run.peak_mib < PEAK_LIMIT_MIB, run.text[-2000:]
    assert run.cpu_s < 20, run.cpu_s


def test_the_dcgm_parse_is_linear_and_bounded() -> None:
    """Grouping is by dict, so the work per series does not grow with the answer."""
    small = parse_dcgm(_exposition(MAX_GPUS).decode())
    assert len(small.gpus) == MAX_GPUS and small.note is None
    big = parse_dcgm(_exposition(MAX_GPUS + 5).decode())
    assert len(big.gpus) == MAX_GPUS
    assert big.note == f"more than {MAX_GPUS} GPUs in one answer: the first {MAX_GPUS} taken"
