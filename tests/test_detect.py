"""Detection per dialect and version, readiness waiting, and errors (fake HTTP, no sockets)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from specwatch.core.redaction import redact_text
from specwatch.core.server import Dialect
from specwatch.sources.detect import WaitStatus, detect, wait_ready
from specwatch.sources.dialects.llamacpp import REASON_METRICS as REASON_LLAMACPP_METRICS
from specwatch.sources.dialects.sglang import FORBIDDEN_PATHS as FORBIDDEN_SGLANG_PATHS
from specwatch.sources.dialects.sglang import REASON_METRICS as REASON_SGLANG_METRICS
from specwatch.sources.dialects.vllm import REASON_METRICS as REASON_VLLM_METRICS
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.http.server_errors import ServerError
from tests.conftest import FakeServer, json_response, text_response


def models(owner: str, model: str = "the-model", **extra: Any) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": model, "object": "model", "owned_by": owner, **extra}],
    }


SGLANG_0523_INFO = {
    "model_path": "meta-llama/Llama-3.1-8B-Instruct",
    "served_model_name": "llama",
    "tp_size": 2,
    "dp_size": 1,
    "speculative_algorithm": "EAGLE3",
    "speculative_draft_model_path": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "enable_metrics": True,
    "api_key": "sk-sglang-secret",
    "launch_command": "python -m sglang.launch_server --model-path m --api-key sk-sglang-secret",
    "internal_states": [{"avg_spec_accept_length": 3.1, "last_gen_throughput": 80.0}],
    "version": "0.5.23",
}


async def test_sglang_0523(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {
            "GET /v1/models": models("sglang", "llama", max_model_len=131072),
            "GET /ready": text_response("ok"),
            "GET /server_info": SGLANG_0523_INFO,
            "GET /metrics": text_response("# TYPE sglang:num_running_reqs gauge\n"),
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.dialect is Dialect.SGLANG
    assert info.version == "0.5.23"
    assert info.model == "llama"
    assert info.max_model_len == 131072
    assert info.spec.enabled is True
    assert info.spec.algorithm == "EAGLE3"
    assert (info.spec.num_steps, info.spec.num_draft_tokens, info.spec.topk) == (3, 4, 1)
    assert info.spec.draft_model == "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B"
    assert info.spec.source == "/server_info"
    assert info.metrics_enabled is True
    assert info.launch_args is not None
    assert "internal_states" not in info.launch_args
    assert "sk-sglang-secret" not in repr(info.launch_args)
    assert info.launch_args["api_key"] == "***"
    assert info.launch_args["tp_size"] == 2
    for path in FORBIDDEN_SGLANG_PATHS:
        assert path not in fake_server.paths()


async def test_sglang_046_old_endpoint_and_metrics_off(fake_server: FakeServer) -> None:
    old = {k: v for k, v in SGLANG_0523_INFO.items() if k != "enable_metrics"}
    old["version"] = "0.4.6.post5"
    fake_server.routes.update(
        {
            "GET /v1/models": models("sglang"),
            "GET /get_server_info": old,
            # /ready, /server_info, /metrics: 404
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.version == "0.4.6.post5"
    assert info.spec.source == "/get_server_info"
    assert info.metrics_enabled is False
    assert info.metrics_reason == REASON_SGLANG_METRICS
    assert not set(FORBIDDEN_SGLANG_PATHS) & set(fake_server.paths())


async def test_sglang_spec_off_and_enable_metrics_false(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {
            "GET /v1/models": models("sglang"),
            "GET /server_info": {"speculative_algorithm": None, "enable_metrics": False},
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.spec.enabled is False
    assert info.metrics_reason == REASON_SGLANG_METRICS
    assert "/metrics" not in fake_server.paths()


async def test_sglang_pd_router_reads_decode_server(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {
            "GET /v1/models": models("sglang"),
            "GET /server_info": {"prefill": [{"version": "0.5.23"}], "decode": [SGLANG_0523_INFO]},
            "GET /metrics": text_response(""),
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.spec.algorithm == "EAGLE3" and "decode" in info.notes["topology"]


async def test_sglang_not_ready_is_loading(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {"GET /v1/models": models("sglang"), "GET /ready": text_response("", 503)}
    )
    async with fake_server.client() as client:
        with pytest.raises(ServerError) as err:
            await detect(client)
    assert err.value.loading and "still loading" in str(err.value)


VLLM_METRICS = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 0
"""


async def test_vllm_spec_from_metrics(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {
            "GET /v1/models": models("vllm", max_model_len=8192),
            "GET /version": {"version": "0.33.0"},
            "GET /metrics": text_response(VLLM_METRICS),
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
    assert (info.dialect, info.version, info.max_model_len) == (Dialect.VLLM, "0.33.0", 8192)
    assert info.spec.enabled is True
    assert info.spec.num_draft_tokens == 3  # three position labels
    assert "position labels" in info.spec.source
    assert info.metrics_enabled is True


async def test_vllm_without_spec_and_with_disable_log_stats(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {
            "GET /v1/models": models("vllm"),
            "GET /version": {"version": "0.20.0"},
            "GET /metrics": text_response("vllm:num_requests_running 0\n"),
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
        assert info.spec.enabled is False
        fake_server.routes["GET /metrics"] = text_response("process_cpu_seconds_total 3\n")
        info = await detect(client)
    assert info.metrics_enabled is False
    assert info.metrics_reason == REASON_VLLM_METRICS
    assert info.spec.enabled is None and "only in /metrics" in info.notes["speculative"]


LLAMA_PROPS = {
    "default_generation_settings": {"n_ctx": 4096, "params": {"speculative.types": "none"}},
    "total_slots": 1,
    "model_alias": "tiny-target",
    "model_path": "/models/tiny-target.gguf",
    "endpoint_metrics": True,
    "build_info": "b1-0c1e570",
}
LLAMA_SLOTS = [
    {
        "id": 0,
        "n_ctx": 4096,
        "speculative": True,
        "is_processing": False,
        "params": {"speculative.types": "none,draft-simple"},
    }
]


async def test_llamacpp_speculation_from_slots_not_props(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {
            "GET /v1/models": models("llamacpp", "tiny-target"),
            "GET /props": LLAMA_PROPS,
            "GET /slots": LLAMA_SLOTS,
            "GET /metrics": text_response("llamacpp:tokens_predicted_total 0\n"),
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.dialect is Dialect.LLAMACPP
    assert info.version == "b1-0c1e570"
    assert info.model == "tiny-target"
    assert info.max_model_len == 4096
    assert info.spec.enabled is True
    assert info.spec.algorithm == "draft-simple"
    assert info.spec.source == "/slots"
    assert "26389" in info.notes["spec_metrics"]  # no spec counters in this exposition


async def test_llamacpp_metrics_off_and_slots_disabled(fake_server: FakeServer) -> None:
    props = dict(LLAMA_PROPS, endpoint_metrics=False)
    fake_server.routes.update(
        {
            "GET /v1/models": models("llamacpp"),
            "GET /props": props,
            "GET /slots": text_response('{"error": "not supported"}', 501),
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.metrics_enabled is False
    assert info.metrics_reason == REASON_LLAMACPP_METRICS
    assert info.spec.enabled is None and "--no-slots" in info.notes["speculative"]


async def test_llamacpp_metrics_501(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {
            "GET /v1/models": models("llamacpp"),
            "GET /props": {k: v for k, v in LLAMA_PROPS.items() if k != "endpoint_metrics"},
            "GET /slots": LLAMA_SLOTS,
            "GET /metrics": text_response("This server does not support metrics endpoint.", 501),
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.metrics_reason == REASON_LLAMACPP_METRICS


async def test_llamacpp_loading_503(fake_server: FakeServer) -> None:
    fake_server.routes["GET /v1/models"] = json_response(
        {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}, 503
    )
    async with fake_server.client() as client:
        with pytest.raises(ServerError) as err:
            await detect(client)
    assert err.value.loading
    assert "HTTP 503" in str(err.value) and "Loading model" in str(err.value)


@pytest.mark.parametrize(
    ("routes", "dialect"),
    [
        ({"GET /props": LLAMA_PROPS}, Dialect.LLAMACPP),
        ({"GET /server_info": SGLANG_0523_INFO}, Dialect.SGLANG),
        ({"GET /version": {"version": "0.11.0"}}, Dialect.VLLM),
        ({}, Dialect.OPENAI),
    ],
)
async def test_fingerprint_when_owned_by_is_generic(
    fake_server: FakeServer, routes: dict[str, Any], dialect: Dialect
) -> None:
    fake_server.routes.update({"GET /v1/models": models("system"), **routes})
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.dialect is dialect
    assert not set(FORBIDDEN_SGLANG_PATHS) & set(fake_server.paths())


async def test_generic_openai(fake_server: FakeServer) -> None:
    fake_server.routes["GET /v1/models"] = models("openai", "gpt-x")
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.dialect is Dialect.OPENAI and info.model == "gpt-x"
    assert info.metrics_enabled is False and info.metrics_reason
    assert info.spec.enabled is None and info.notes["speculative"]


async def test_bearer_sent_and_401_is_clear_without_the_key(fake_server: FakeServer) -> None:
    seen: list[str] = []

    def guarded(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization", ""))
        return json_response({"error": "Unauthorized: sk-wrong-key"}, 401)

    fake_server.routes["GET /v1/models"] = guarded
    async with fake_server.client(api_key="sk-wrong-key") as client:
        with pytest.raises(ServerError) as err:
            await detect(client)
    assert seen == ["Bearer sk-wrong-key"]
    message = str(err.value)
    assert "sk-wrong-key" not in message
    # The hint stays readable: the redaction of "--api-key X" must not eat its "or".
    # What to do comes first: the status line keeps the head of a long message.
    assert message == (
        "API key missing or wrong: use --api-key, or SPECWATCH_API_KEY — http://127.0.0.1:8000"
        '/v1/models: HTTP 401 Unauthorized: {"error":"Unauthorized: ***"}'
    )
    # and so does a snapshot's or a recording's redaction of the stored message
    assert redact_text(message).startswith(message.split(" — ")[0] + " — ")
    assert not err.value.retryable


async def test_garbage_models_is_a_clear_error(fake_server: FakeServer) -> None:
    fake_server.routes["GET /v1/models"] = text_response("<html>proxy error</html>")
    async with fake_server.client() as client:
        with pytest.raises(ServerError) as err:
            await detect(client)
    assert err.value.kind == "garbage"
    assert str(err.value).startswith("http://127.0.0.1:8000/v1/models: the answer is not JSON")


# --- wait_ready -----------------------------------------------------------------------------


class Script:
    """/v1/models answers by attempt: refused, loading (503), then ready."""

    def __init__(self, plan: list[str]) -> None:
        self.plan = plan
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        step = self.plan[min(self.calls, len(self.plan) - 1)]
        self.calls += 1
        if step == "refused":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if step == "loading":
            return json_response({"error": {"code": 503, "message": "Loading model"}}, 503)
        if step == "garbage":
            return text_response("<html>")
        return json_response(models("llamacpp"))


class FakeTime:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


async def test_wait_ready_reports_each_attempt(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {
            "GET /v1/models": Script(["refused", "refused", "loading", "garbage", "ready"]),
            "GET /props": LLAMA_PROPS,
            "GET /slots": LLAMA_SLOTS,
            "GET /metrics": text_response(""),
        }
    )
    statuses: list[WaitStatus] = []
    ft = FakeTime()
    async with fake_server.client() as client:
        info = await wait_ready(
            client, statuses.append, timeout_s=60, interval_s=15, sleep=ft.sleep, clock=ft.now
        )
    assert info.dialect is Dialect.LLAMACPP
    assert [s.state for s in statuses] == ["refused", "refused", "loading", "error", "ready"]
    assert [s.attempt for s in statuses] == [1, 2, 3, 4, 5]
    assert [s.elapsed_s for s in statuses] == [0.0, 15.0, 30.0, 45.0, 60.0]
    assert "connection refused" in statuses[0].detail
    assert ft.sleeps == [15, 15, 15, 15]


async def test_wait_ready_times_out_with_attempts_and_elapsed(fake_server: FakeServer) -> None:
    fake_server.routes["GET /v1/models"] = Script(["loading"])
    ft = FakeTime()
    async with fake_server.client() as client:
        with pytest.raises(ServerError) as err:
            await wait_ready(client, None, timeout_s=10, interval_s=3, sleep=ft.sleep, clock=ft.now)
    message = str(err.value)
    assert "not ready after 4 attempts in 9.0 s" in message
    assert "HTTP 503" in message


async def test_wait_ready_gives_up_at_once_on_a_bad_key(fake_server: FakeServer) -> None:
    fake_server.routes["GET /v1/models"] = json_response({"error": "bad key"}, 401)
    ft = FakeTime()
    statuses: list[WaitStatus] = []
    async with fake_server.client() as client:
        with pytest.raises(ServerError):
            await wait_ready(client, statuses.append, timeout_s=100, sleep=ft.sleep, clock=ft.now)
    assert len(statuses) == 1 and statuses[0].state == "error"
    assert ft.sleeps == []


@pytest.mark.parametrize(
    ("exc", "kind", "message"),
    [
        (
            httpx.ConnectTimeout("timed out"),
            "timeout",
            "cannot connect to {u}: timed out after 5 s",
        ),
        (
            httpx.ConnectError("[Errno -2] Name or service not known"),
            "resolve",
            "cannot resolve the host of {u}",
        ),
        (httpx.ReadTimeout("timed out"), "hung", "no answer from {u} within 5 s (server hung?)"),
        (
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            "closed",
            "connection to {u} closed by the server mid-response",
        ),
        (
            httpx.RemoteProtocolError("peer closed connection without sending complete body"),
            "closed",
            "connection to {u} closed by the server mid-response",
        ),
        (
            # ssh (or anything else that is not HTTP) on the port
            httpx.RemoteProtocolError("illegal status line: bytearray(b'SSH-2.0-OpenSSH_9.6')"),
            "garbage",
            "{u}: the answer is not valid HTTP (illegal status line: "
            "bytearray(b'SSH-2.0-OpenSSH_9.6')); another program on that port?",
        ),
    ],
)
async def test_transport_errors_are_one_line(
    fake_server: FakeServer, exc: Exception, kind: str, message: str
) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise exc

    fake_server.routes["GET /v1/models"] = fail
    async with fake_server.client() as client:
        with pytest.raises(ServerError) as err:
            await detect(client)
    assert err.value.kind == kind
    assert str(err.value) == message.format(u="http://127.0.0.1:8000/v1/models")


def _router(fake_server: FakeServer, states: dict[str, str]) -> None:
    """A llama-server router answering for its models in ``states`` (id -> status)."""
    cards = [
        {
            "id": name,
            "aliases": [f"{name}-alias"],
            "owned_by": "llamacpp",
            "status": {
                "value": state,
                "args": [
                    "llama-server",
                    "--spec-draft-n-max",
                    "3",
                    "--api-key",
                    "sk-child-secret",
                    "-md",
                    "d.gguf",
                ],
            },
        }
        for name, state in states.items()
    ]

    def props(request: httpx.Request) -> Any:
        model = request.url.params.get("model")
        if model is None:
            return {"role": "router", "build_info": "b1-test", "model_alias": "llama-server"}
        assert request.url.params.get("autoload") == "false", request.url
        return {
            "build_info": "b1-test",
            "model_alias": model,
            "default_generation_settings": {"n_ctx": 2048},
        }

    fake_server.routes["GET /v1/models"] = {"data": cards}
    fake_server.routes["GET /props"] = props
    fake_server.routes["GET /slots"] = lambda r: [{"id": 0, "n_ctx": 2048, "speculative": True}]
    fake_server.routes["GET /metrics"] = text_response("llamacpp:tokens_predicted_total 5\n")


async def test_a_router_is_read_through_its_first_loaded_model(fake_server: FakeServer) -> None:
    _router(fake_server, {"a": "unloaded", "b": "sleeping", "c": "loaded", "d": "loaded"})
    async with fake_server.client() as client:
        info = await detect(client)
        assert client.route == "c"
    assert info.model == "c" and info.version == "b1-test"
    assert info.routed == (
        "a llama-server router: watching c (also loaded: d, b; another: host:port?model=NAME)"
    )
    # the child's command line, as the router reports it, with its secret withheld
    argv = info.launch_args["argv"] if info.launch_args else []
    assert "sk-child-secret" not in argv and argv[argv.index("--api-key") + 1] == "***"
    assert info.spec.num_draft_tokens == 3 and info.spec.enabled
    routed = [r.url for r in fake_server.requests if r.url.params.get("model")]
    assert routed and all(u.params["model"] == "c" for u in routed)
    assert all(u.params["autoload"] == "false" for u in routed)


async def test_a_router_model_named_in_the_address(fake_server: FakeServer) -> None:
    _router(fake_server, {"a": "loaded", "b": "loaded", "z": "unloaded"})
    async with fake_server.client("http://127.0.0.1:8000") as client:
        client.endpoint = parse_endpoint("127.0.0.1:8000?model=b-alias", env={})
        info = await detect(client)
        assert client.route == "b-alias" and info.model == "b-alias"
        client.endpoint = parse_endpoint("127.0.0.1:8000?model=z", env={})
        with pytest.raises(ServerError) as unloaded:
            await detect(client)
        client.endpoint = parse_endpoint("127.0.0.1:8000?model=nope", env={})
        with pytest.raises(ServerError) as unknown:
            await detect(client)
    assert unloaded.value.loading and "whose model 'z' is not loaded" in str(unloaded.value)
    assert unknown.value.status == 404 and not unknown.value.loading
    assert "a llama-server router with no model 'nope' (its models: a, b, z)" in str(unknown.value)
    # nothing asked a model that is not loaded for anything
    assert not [r for r in fake_server.requests if r.url.params.get("model") in ("z", "nope")]


async def test_a_router_with_nothing_loaded_is_waited_for(fake_server: FakeServer) -> None:
    _router(fake_server, {"a": "unloaded", "b": "loading"})
    async with fake_server.client() as client:
        with pytest.raises(ServerError) as err:
            await detect(client)
        assert client.route is None
    assert err.value.loading and "with none of its 2 models loaded" in str(err.value)


async def test_a_hostile_router_listing_is_read_within_bounds(fake_server: FakeServer) -> None:
    junk: list[Any] = [None, 7, "x", {"id": None}, {"id": "a", "status": "loaded"}]
    junk += [{"id": f"m{i}", "status": {"value": "unloaded", "args": "--x"}} for i in range(5000)]
    junk.append({"id": "late\x1b[31m", "status": {"value": "loaded", "args": [{"k": 1}] * 9999}})
    _router(fake_server, {})
    fake_server.routes["GET /v1/models"] = {"data": junk}
    async with fake_server.client() as client:
        with pytest.raises(ServerError) as err:
            await detect(client)
    # only the first 1024 cards are read: the loaded one past them is not seen
    assert err.value.loading and "none of its 1024 models loaded" in str(err.value)
    fake_server.routes["GET /v1/models"] = {"data": [junk[-1]]}
    async with fake_server.client() as client:
        info = await detect(client)
    argv = (info.launch_args or {}).get("argv", [])
    # the name from outside is shown cleaned (the route asks for it as the router wrote it)
    assert len(argv) == 512 and info.model == "late\\x1b[31m" and "\x1b" not in info.routed
