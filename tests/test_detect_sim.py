"""Detection, readiness and stream faults against the simulator over loopback."""

from __future__ import annotations

import httpx
import pytest

from specwatch.core.server import Dialect
from specwatch.sources.detect import WaitStatus, detect, wait_ready
from specwatch.sources.dialects.sglang import FORBIDDEN_PATHS as FORBIDDEN_SGLANG_PATHS
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.stream import stream_completion
from tests.conftest import drive_stream, running_sim
from tests.sim_fixtures import faults_of


@pytest.mark.parametrize(
    ("dialect", "version", "expected"),
    [
        ("sglang", "0.5.23", Dialect.SGLANG),
        ("sglang", "0.5.10", Dialect.SGLANG),
        ("sglang", "0.5.4", Dialect.SGLANG),
        ("sglang", "0.4.6.post5", Dialect.SGLANG),
        ("vllm", "0.33.0", Dialect.VLLM),
        ("vllm", "0.11.0", Dialect.VLLM),
        ("vllm", "0.9.2", Dialect.VLLM),
        ("llamacpp", "b6500-0c1e570", Dialect.LLAMACPP),
        ("llamacpp", "b5200-abcdef0", Dialect.LLAMACPP),
        ("openai", None, Dialect.OPENAI),
    ],
)
async def test_detects_dialect_version_model_and_spec(
    dialect: str, version: str | None, expected: Dialect
) -> None:
    with running_sim(dialect, version) as sim:
        cfg = sim.world.config
        async with sim.client() as client:
            info = await detect(client)
        hits = dict(sim.world.truth.endpoint_hits)
        generations = sim.world.truth.health_generations
    assert info.dialect is expected
    assert info.base_url == sim.url
    if expected is Dialect.OPENAI:
        assert info.version is None and info.spec.enabled is None
        return
    assert info.version == cfg.version
    assert info.model == cfg.model
    assert info.metrics_enabled is True
    if expected is Dialect.SGLANG:
        assert info.spec.enabled is True and info.spec.algorithm == cfg.spec_algorithm
        assert info.spec.num_steps == cfg.num_steps
        assert info.spec.num_draft_tokens == cfg.num_draft_tokens
        for path in FORBIDDEN_SGLANG_PATHS:
            assert f"GET {path}" not in hits
        assert generations == 0
    elif expected is Dialect.VLLM:
        assert info.spec.enabled is True
        assert info.spec.num_draft_tokens == cfg.num_draft_tokens  # from position labels
    else:
        # /props says none; /slots tells the truth
        assert info.spec.enabled is True and info.spec.source == "/slots"
        if sim.world.config.llamacpp_new:
            assert info.spec.algorithm == "draft-simple"
            assert "spec_metrics" not in info.notes
        else:
            assert "26389" in info.notes["spec_metrics"]


async def test_sglang_health_never_called_across_a_session(no_env_proxy: None) -> None:
    """Detect, wait, scrape and stream: the SGLang /health generation never runs."""
    from specwatch.sources.watcher import MetricsWatcher

    with running_sim("sglang", "0.5.23", background_concurrency=2) as sim:
        async with sim.client() as client:
            paths: list[str] = []

            assert client.transport is not None
            sent: httpx.AsyncBaseTransport = client.transport

            class Recording(httpx.AsyncBaseTransport):
                async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                    paths.append(request.url.path)
                    return await sent.handle_async_request(request)

            # every request the client sends goes through its transport; the server counts them
            client.transport = Recording()
            info = await wait_ready(client, timeout_s=5)
            watcher = MetricsWatcher(client, info, clock=sim.clock.now)
            for _ in range(5):
                await watcher.scrape()
                sim.advance(1.0)
            await drive_stream(sim, client, info, 32)
        hits = dict(sim.world.truth.endpoint_hits)
        generations = sim.world.truth.health_generations
    assert generations == 0
    served = [h.split(" ", 1)[1] for h in hits]
    assert "/metrics" in served and "/generate" in paths and "/generate" in served
    assert not set(FORBIDDEN_SGLANG_PATHS) & (set(paths) | set(served))
    assert not any(h.endswith(("/health", "/health_generate")) for h in hits)


@pytest.mark.parametrize(
    ("dialect", "waiting_state"),
    [("sglang", "refused"), ("vllm", "refused"), ("llamacpp", "loading")],
)
async def test_wait_ready_while_loading(dialect: str, waiting_state: str) -> None:
    with running_sim(dialect, load_time_s=4.0) as sim:
        statuses: list[WaitStatus] = []

        async def sleep(s: float) -> None:
            sim.advance(s)
            # a refused port starts listening on the simulator's own loop once loaded
            if sim.world.loaded():
                sim.server.wait_listening(5)

        async with sim.client() as client:
            info = await wait_ready(
                client,
                statuses.append,
                timeout_s=60,
                interval_s=1.0,
                sleep=sleep,
                clock=sim.clock.now,
            )
    assert info.dialect.value == dialect
    states = [s.state for s in statuses]
    assert states[-1] == "ready"
    assert set(states[:-1]) == {waiting_state}
    assert len(states) == 5  # t = 0, 1, 2, 3 waiting; ready at 4
    assert [s.attempt for s in statuses] == [1, 2, 3, 4, 5]
    assert statuses[-1].elapsed_s == pytest.approx(4.0)


async def test_api_key_required_and_sent() -> None:
    with running_sim("llamacpp", api_key="sk-sim-secret") as sim:
        # llama-server keeps /v1/models open and its /props and /metrics behind the key
        async with sim.client(api_key="wrong") as client:
            with pytest.raises(ServerError) as err:
                await detect(client)
        async with sim.client(api_key="sk-sim-secret") as client:
            info = await detect(client)
            r = await drive_stream(sim, client, info, 16)
    assert err.value.status == 401 and "wrong" not in str(err.value)
    assert "sk-sim-secret" not in str(err.value)
    assert info.dialect is Dialect.LLAMACPP and r.completion_tokens == 16 and not info.keyless


@pytest.mark.parametrize("dialect", ["vllm", "sglang"])
async def test_a_server_with_open_metrics_is_watched_without_its_key(dialect: str) -> None:
    """vLLM and SGLang keep /metrics open under --api-key: the monitor names the server from
    its series and watches them; the refusal is said, and a stream still needs the key."""
    with running_sim(dialect, api_key="sk-sim-secret") as sim:
        async with sim.client(api_key="sk-not-this-one") as client:
            info = await detect(client)
            refused = await stream_completion(client, info, "the prompt", 16)
        async with sim.client(api_key="sk-sim-secret") as client:
            keyed = await detect(client)
    assert info.dialect.value == dialect and info.metrics_enabled is True
    assert info.keyless.startswith("API key missing or wrong: use --api-key, or")
    assert "/v1/models: HTTP 401" in info.keyless and "sk-" not in info.keyless
    assert (refused.error or "").startswith("API key missing or wrong"), refused.error
    assert keyed.keyless == "" and keyed.model is not None
    assert info.model == keyed.model  # from the series' model_name label
    if dialect == "sglang":
        assert info.notes["server_info"] == "/server_info wants the API key: arguments not read"
        assert info.spec.enabled is None


async def test_a_server_whose_metrics_want_the_key_too_is_refused() -> None:
    with running_sim("vllm", api_key="sk-sim-secret", metrics_enabled=False) as sim:
        async with sim.client() as client:
            with pytest.raises(ServerError) as err:
                await detect(client)
    assert err.value.unauthorised


async def test_unreachable_is_one_clear_line() -> None:
    with running_sim("vllm") as sim:
        url = sim.url
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.endpoint import Endpoint

    async with ServerClient(Endpoint(url)) as client:
        with pytest.raises(ServerError) as err:
            await detect(client)
    assert str(err.value) == f"cannot connect to {url}/v1/models: connection refused"
    assert err.value.kind == "refused"


# --- stream faults ----------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["sglang", "vllm", "llamacpp"])
async def test_stream_faults_clear_errors_nothing_lost(dialect: str) -> None:
    with running_sim(dialect, warmup_requests=0) as sim:
        faults = faults_of(sim.world)
        async with sim.client(timeout_s=0.5) as client:
            info = await detect(client)

            faults.fail_next(status=500, path=info_path(info.dialect))
            r = await stream_completion(client, info, "p", 16, clock=sim.clock.now)
            assert r.error is not None and "HTTP 500" in r.error and "\n" not in r.error
            assert r.completion_tokens == 0

            faults.drop_stream(after_chunks=4)
            r = await drive_stream(sim, client, info, 64)
            assert r.error is not None and "dropped by the server after" in r.error
            assert r.completion_tokens > 0 and r.chunks[-1].tokens == r.completion_tokens
            assert f"after {r.completion_tokens} tokens" in r.error

            faults.garbage_in_streams()
            r = await drive_stream(sim, client, info, 64)
            assert r.error is not None and "unparseable line" in r.error
            assert r.completion_tokens == 64  # the garbage cost nothing

            r = await drive_stream(sim, client, info, 32)
            assert r.error is None and r.completion_tokens == 32

            # last: the hung request is released at the end and would otherwise linger
            faults.hang(path=info_path(info.dialect))
            r = await stream_completion(client, info, "p", 16, clock=sim.clock.now)
            faults.clear_hang()
            assert r.error is not None and "hung" in r.error


async def test_restart_mid_stream_is_a_clear_error() -> None:
    import asyncio

    with running_sim("vllm", warmup_requests=0) as sim:
        async with sim.client() as client:
            info = await detect(client)
            some = asyncio.Event()
            task = asyncio.create_task(
                stream_completion(
                    client, info, "p", 500, clock=sim.clock.now, on_chunk=lambda c: some.set()
                )
            )
            while not sim.world.engine.running:
                await asyncio.sleep(0.001)
            sim.advance(0.5)
            await asyncio.wait_for(some.wait(), 10)
            sim.world.restart()
            r = await asyncio.wait_for(task, 10)
    assert r.error is not None
    assert "dropped" in r.error or "ended before" in r.error
    assert 0 < r.completion_tokens < 500


def info_path(dialect: Dialect) -> str:
    return {Dialect.SGLANG: "/generate", Dialect.LLAMACPP: "/completion"}.get(
        dialect, "/v1/completions"
    )


async def test_https_to_a_plain_http_server_is_a_tls_error() -> None:
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.http.endpoint import parse_endpoint

    with running_sim("vllm") as sim:
        url = sim.url.replace("http://", "https://")
        async with ServerClient(parse_endpoint(url, env={})) as client:
            with pytest.raises(ServerError) as err:
                await detect(client)
    assert err.value.kind == "tls" and not err.value.retryable
    assert str(err.value) == (
        f"TLS error talking to {url}/v1/models: WRONG_VERSION_NUMBER "
        "(the server speaks plain http? use http://)"
    )


async def test_an_idle_llamacpp_watch_asks_its_slots_once() -> None:
    """llama-server counts a ``/slots`` read as activity (it keeps one started with
    ``--sleep-idle-seconds`` awake): an idle server's slots are asked at the first scrape only."""
    from specwatch.sources.watcher import MetricsWatcher

    with running_sim("llamacpp") as sim:
        async with sim.client() as client:
            info = await detect(client)
            watcher = MetricsWatcher(client, info)
            hits = sim.world.truth.endpoint_hits
            before = hits["GET /slots"]
            windows = [await watcher.scrape() for _ in range(6)]
            asked = hits["GET /slots"] - before
    assert asked == 1, asked
    assert all(w.tokens == 0 for w in windows[1:]), [w.tokens for w in windows]
