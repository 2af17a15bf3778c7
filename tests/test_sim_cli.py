"""``specwatch sim`` standalone: one line with the URL, curl-able, stops on SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx
import pytest

from tests.sim_testing import metric_names

# These run `specwatch sim` with its dcgm-exporter on its default port (9400), or need that
# port free or taken by themselves: under pytest-xdist they share one worker.
pytestmark = pytest.mark.xdist_group("dcgm-default-port")

CODE = (
    "import argparse, sys\n"
    "from specwatch.commands.sim import add_sim_arguments, run_sim\n"
    "p = argparse.ArgumentParser()\n"
    "add_sim_arguments(p)\n"
    "sys.exit(run_sim(p.parse_args(sys.argv[1:])))\n"
)


def test_sim_runs_standalone_and_can_be_curled() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CODE, "--dialect", "vllm", "--server-version", "0.11.0",
         "--port", "0", "--background", "1", "--gpus", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "vllm 0.11.0" in line
        url = line.split(" at ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url + "/v1/models").json()["data"][0]["owned_by"] == "vllm"
        names = metric_names(httpx.get(url + "/metrics").text)
        assert "vllm:time_per_output_token_seconds_count" in names
        assert httpx.get(url + "/version").json() == {"version": "0.11.0"}
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def test_sim_reports_a_busy_port() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-c", CODE, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert done.returncode == 1
    assert "cannot serve" in done.stderr


def test_sim_serves_a_dcgm_exporter_for_its_gpus() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CODE, "--port", "0", "--gpus", "2", "--dcgm-port", "0",
         "--dcgm-interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert "serving" in proc.stdout.readline()  # the server's line stays the first
        line = proc.stdout.readline()
        assert "dcgm-exporter" in line
        url = line.split(" at ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        body = httpx.get(url).text
        assert 'DCGM_FI_DEV_SM_CLOCK{gpu="1",' in body and "DCGM_FI_DEV_FAN_SPEED" not in body
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def test_a_taken_exporter_port_leaves_the_url_line_first() -> None:
    # The default exporter port (9400) taken: the server still serves, its URL line first.
    import socket

    from specwatch.commands.sim import DCGM_DEFAULT_PORT

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", DCGM_DEFAULT_PORT))
        except OSError:
            pass  # taken already: the case itself
        else:
            s.listen()
        proc = subprocess.Popen(
            [sys.executable, "-c", CODE, "--port", "0", "--gpus", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            assert " at http://" in proc.stdout.readline()
            assert "no dcgm-exporter" in proc.stdout.readline()
        finally:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=10)
