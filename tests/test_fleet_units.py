"""Fleet pieces without a Prometheus: the join, exact totals, PromQL, derivation, the client."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specwatch.core.fleet import (
    FleetGpu,
    FleetServer,
    NodeJoin,
    ServerRates,
    fleet_totals,
    host_of,
    join_gpus,
    parse_node_pair,
    target_of,
)
from specwatch.core.gpu import GpuSample, GpuStatic
from specwatch.core.server import Dialect, MetricsWindow
from specwatch.sources.dcgm.parse import NOT_EXPORTED
from specwatch.sources.prometheus.api import (
    PrometheusClient,
    PrometheusError,
    VectorSample,
    parse_duration,
    prometheus_endpoint,
)
from specwatch.sources.prometheus.queries import (
    COUNTERS,
    FIELD_LABEL,
    derive_gpus,
    derive_servers,
    gpu_query,
    label_matcher,
    server_rates_query,
)


def _server(instance: str, **labels: str) -> FleetServer:
    return FleetServer(
        instance, "vllm", Dialect.VLLM, None, MetricsWindow(t=0, dt=0), labels=labels
    )


def _gpu(instance: str, uuid: str, hostname: str | None = None, **labels: str) -> FleetGpu:
    return FleetGpu(
        f"{instance}/{uuid}",
        instance,
        hostname,
        GpuStatic(0, uuid=uuid),
        GpuSample(0, 0.0),
        labels=labels,
    )


def test_join_by_pair_pod_and_host() -> None:
    servers = [
        _server("node1.dc.example:8000"),
        _server("10.0.0.7:8000", pod="vllm-0", namespace="llm"),
        _server("localhost:30000"),
        _server("10.0.0.9:8000"),
        _server("node5:8000"),
    ]
    gpus = [
        _gpu("10.0.0.1:9400", "A", hostname="node1"),
        _gpu("10.0.0.7:9400", "B", hostname="node7", pod="vllm-0", namespace="llm"),
        _gpu("10.0.0.7:9400", "C", hostname="node7", pod="other", namespace="llm"),
        _gpu("127.0.0.1:9400", "D"),
        _gpu("dcgm-x:9400", "E", hostname="node9"),
    ]
    pairs = [parse_node_pair("http://10.0.0.9:8000=dcgm-x:9400")]
    joins = {j.server: j for j in join_gpus(servers, gpus, pairs)}
    assert joins["node1.dc.example:8000"].gpus == ("10.0.0.1:9400/A",)
    assert joins["node1.dc.example:8000"].via == "host"
    assert joins["10.0.0.7:8000"].gpus == ("10.0.0.7:9400/B",)
    assert joins["10.0.0.7:8000"].via == "pod"
    assert joins["localhost:30000"].gpus == ("127.0.0.1:9400/D",)
    assert joins["10.0.0.9:8000"].via == "pair"
    assert joins["10.0.0.9:8000"].gpus == ("dcgm-x:9400/E",)
    assert joins["node5:8000"].gpus == () and joins["node5:8000"].via is None


def test_a_server_joins_the_exporter_on_its_host_whatever_its_hostname_label() -> None:
    # issue 21 item 14: every simulated exporter says Hostname="sim-node"; each serves on its
    # server's host, as the README's rule (the exporter target's host) promises a join.
    servers = [_server(f"127.0.0.{i}:8000") for i in (2, 3, 4)]
    gpus = [_gpu(f"127.0.0.{i}:19101", f"G{i}", hostname="sim-node") for i in (2, 3, 4)]
    joins = join_gpus(servers, gpus)
    assert [(j.gpus, j.via) for j in joins] == [
        ((f"127.0.0.{i}:19101/G{i}",), "host") for i in (2, 3, 4)
    ]


def test_ips_never_match_by_prefix() -> None:
    joins = join_gpus([_server("10.0.0.1:8000")], [_gpu("x:1", "A", hostname="10.0.0.2")])
    assert joins[0].gpus == ()


def test_node_pair_and_host_parsing() -> None:
    assert parse_node_pair("box:8000=https://box:9400/metrics") == ("box:8000", "box:9400")
    assert host_of("[::1]:8000") == "127.0.0.1" and host_of("Node1:80") == "node1"
    with pytest.raises(ValueError, match="SERVER_URL=DCGM_URL"):
        parse_node_pair("box:8000")


def test_totals_are_exact_not_means_of_means() -> None:
    # a busy server (accept length 3) and an idle one with one draft step (accept length 1)
    busy = FleetServer(
        "a:1", "j", Dialect.VLLM, None, MetricsWindow(t=0, dt=1, gen_tok_s=300.0,
        requests_running=8), ServerRates(300.0, 300.0, 100.0, 200.0, 300.0),
    )  # fmt: skip
    idle = FleetServer(
        "b:1", "j", Dialect.VLLM, None, MetricsWindow(t=0, dt=1, gen_tok_s=1.0,
        requests_running=0), ServerRates(1.0, 1.0, 1.0, 0.0, 3.0),
    )  # fmt: skip
    totals = fleet_totals([busy, idle])
    assert totals.gen_tok_s == 301.0 and totals.requests_running == 8
    assert totals.accept_length == pytest.approx(301.0 / 101.0)  # not (3 + 1) / 2
    assert totals.draft_acceptance_rate == pytest.approx(200.0 / 303.0)
    assert fleet_totals([]).gen_tok_s is None


def test_matchers_and_queries() -> None:
    assert label_matcher('{job="vllm"}') == 'job="vllm"'
    assert label_matcher(None) == "" and label_matcher(" {} ") == ""
    with pytest.raises(ValueError, match="label matcher"):
        label_matcher('job="vllm"')
    q = server_rates_query(4.0, 'job="vllm"')
    assert q.count("rate(") == len(COUNTERS) and "[4000ms]" in q
    assert 'realtime_tokens_total{mode="decode",job="vllm"}' in q
    assert parse_duration("1m30s") == 90.0 and parse_duration("1s") == 1.0
    assert parse_duration("soon") is None


def _rate(instance: str, field: str, value: float) -> VectorSample:
    return VectorSample({"instance": instance, "job": "j", FIELD_LABEL: field}, 0.0, value)


def test_derive_vllm_and_sglang() -> None:
    gauges = [
        VectorSample({"__name__": "vllm:num_requests_running", "instance": "a:1", "job": "j",
                      "model_name": "m", "engine": str(e)}, 0.0, 2.0)
        for e in range(2)
    ]  # fmt: skip
    rates = [
        _rate("a:1", "vllm:gen", 100.0),
        _rate("a:1", "vllm:acc", 60.0),
        _rate("a:1", "vllm:drafts", 40.0),
        _rate("a:1", "vllm:dtok", 120.0),
        _rate("a:1", "vllm:itl_sum", 0.5),
        _rate("a:1", "vllm:itl_count", 25.0),
        _rate("s:1", "sglang:live", 90.0),
        _rate("s:1", "sglang:first", 10.0),
        _rate("s:1", "sglang:gen", 100.0),
        _rate("s:1", "sglang:req", 10.0),
        _rate("s:1", "sglang:verify", 30.0),
        _rate("s:1", "sglang:itl_sum", 0.4),
        _rate("s:1", "sglang:itl_count", 100.0),
    ]
    servers = {s.instance: s for s in derive_servers(gauges, rates, 5.0, 4.0)}
    v = servers["a:1"]
    assert v.dialect is Dialect.VLLM and v.model == "m"
    assert v.window.requests_running == 4.0  # both engines
    assert v.window.accept_length == pytest.approx(2.5)
    assert v.window.draft_acceptance_rate == pytest.approx(0.5)
    assert v.window.step_latency_s == pytest.approx(0.02)
    s = servers["s:1"]
    assert s.window.gen_tok_s == 100.0 and s.window.accept_length == pytest.approx(3.0)
    assert s.window.step_latency_s == pytest.approx(0.012)
    assert fleet_totals([v, s]).accept_length == pytest.approx((100 + 90) / (40 + 30))


def test_derive_llamacpp_step_time_from_its_request_counters() -> None:
    gauges = [VectorSample({"__name__": "llamacpp:requests_processing", "instance": "l:1",
                            "job": "j"}, 0.0, 1.0)]  # fmt: skip
    rates = [
        _rate("l:1", "llamacpp:gen", 100.0),
        _rate("l:1", "llamacpp:gen_s", 0.05),
        _rate("l:1", "llamacpp:acc", 60.0),
        _rate("l:1", "llamacpp:drafts", 20.0),
        _rate("l:1", "llamacpp:dtok", 80.0),
    ]
    (server,) = derive_servers(gauges, rates, 5.0, 30.0)
    w = server.window
    assert w.accept_length == pytest.approx(4.0)
    # a step yields one token and the drafts it accepted: 100 - 60 steps in 0.05 s
    assert w.step_latency_s == pytest.approx(0.05 / 40.0)
    plain = [_rate("l:1", "llamacpp:gen", 100.0), _rate("l:1", "llamacpp:gen_s", 0.05)]
    (server,) = derive_servers(gauges, plain, 5.0, 30.0)
    assert server.window.step_latency_s == pytest.approx(0.0005)
    (idle,) = derive_servers(gauges, [_rate("l:1", "llamacpp:gen", 0.0)], 5.0, 30.0)
    assert idle.window.step_latency_s is None
    assert idle.window.notes["step_latency_s"] == "no request finished in the window"


def test_derive_gpus_blank_and_absent() -> None:
    base = {"instance": "n:9400", "gpu": "3", "UUID": "GPU-x", "Hostname": "n"}
    samples = [
        VectorSample({**base, "__name__": "DCGM_FI_DEV_SM_CLOCK"}, 0.0, 1400.0),
        VectorSample({**base, "__name__": "DCGM_FI_DEV_GPU_TEMP"}, 0.0, 2147483647.0),
        VectorSample({**base, "__name__": "DCGM_FI_DEV_POWER_USAGE"}, 0.0, 140737488355328.0),
    ]
    (gpu,) = derive_gpus(samples, 1.0)
    assert gpu.static.index == 3 and gpu.sample.sm_clock_mhz == 1400
    assert gpu.sample.temp_c is None and gpu.sample.missing["temp_c"].startswith("n/s")
    assert gpu.sample.power_w is None and gpu.sample.missing["power_w"].startswith("n/s")
    # the dcgm-exporter parser's reasons: which field to add to the counters CSV
    assert gpu.sample.missing["pcie_gen"] == f"{NOT_EXPORTED} (DCGM_FI_DEV_PCIE_LINK_GEN)"
    assert gpu.static.uuid == "GPU-x" and gpu.key == "n:9400/GPU-x" and gpu.hostname == "n"


def test_derive_gpus_uses_the_dcgm_parser_field_map() -> None:
    """Old field names and scaled counters convert as the exporter parser converts them."""
    base = {"instance": "n:9400", "gpu": "0", "Hostname": "n"}
    samples = [
        VectorSample({**base, "__name__": "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"}, 0.0, 4.0),
        VectorSample({**base, "__name__": "DCGM_FI_DEV_THERMAL_VIOLATION"}, 0.0, 7.0),
    ]
    (gpu,) = derive_gpus(samples, 1.0)
    assert gpu.sample.clock_event_reasons == 4 and gpu.sample.thermal_violation_ns == 7
    assert gpu.key == "n:9400/0"
    assert "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in gpu_query()


def test_bare_host_means_port_9090_and_no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-key")
    ep = prometheus_endpoint("prom")
    assert ep.base_url == "http://prom:9090" and ep.api_key is None
    assert prometheus_endpoint("https://prom.example/api").base_url == "https://prom.example/api"


async def test_client_size_limit_deadline_and_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/query" and b"big" in request.content:
            return httpx.Response(200, content=b"x" * 5000)
        return httpx.Response(
            400, json={"status": "error", "errorType": "bad_data", "error": "parse error"}
        )

    ep = prometheus_endpoint("prom")
    async with PrometheusClient(
        ep, max_body_bytes=1000, transport=httpx.MockTransport(handler)
    ) as c:
        with pytest.raises(PrometheusError, match="larger than 1000 bytes"):
            await c.query("big")
        with pytest.raises(PrometheusError, match="bad_data: parse error"):
            await c.query("up{")
        assert c.requests == 2

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200)

    async with PrometheusClient(ep, deadline_s=0.05, transport=httpx.MockTransport(slow)) as c:
        with pytest.raises(PrometheusError, match=r"within 0\.05 s") as err:
            await c.query("up")
    assert err.value.kind == "hung"


def _scan_join(
    servers: list[FleetServer], gpus: list[FleetGpu], pairs: list[tuple[str, str]]
) -> list[NodeJoin]:
    """The join as it was written first, scanning every GPU for every server: the reference."""

    def same_host(a: str, b: str) -> bool:
        if not a or not b:
            return False
        if a == b:
            return True
        if a.replace(".", "").isdigit() or b.replace(".", "").isdigit():
            return False
        return ("." not in a or "." not in b) and a.split(".", 1)[0] == b.split(".", 1)[0]

    def pod_of(labels: Mapping[str, str]) -> tuple[str, str] | None:
        pod = labels.get("pod") or ""
        return (pod, labels.get("namespace") or "") if pod else None

    paired: dict[str, set[str]] = {}
    for s, e in pairs:
        paired.setdefault(target_of(s), set()).add(target_of(e))
    out = []
    for server in servers:
        exporters = paired.get(target_of(server.instance))
        if exporters is not None:
            keys = tuple(g.key for g in gpus if target_of(g.instance) in exporters)
            out.append(NodeJoin(server.instance, keys, "pair"))
            continue
        pod = pod_of(server.labels)
        if pod is not None:
            keys = tuple(
                g.key
                for g in gpus
                if (gp := pod_of(g.labels)) is not None
                and gp[0] == pod[0]
                and (not (pod[1] and gp[1]) or pod[1] == gp[1])
            )
            if keys:
                out.append(NodeJoin(server.instance, keys, "pod"))
                continue
        host = host_of(server.instance)
        keys = tuple(
            g.key
            for g in gpus
            if (g.hostname and same_host(host, host_of(g.hostname)))
            or same_host(host, host_of(g.instance))
        )
        out.append(NodeJoin(server.instance, keys, "host" if keys else None))
    return out


_hosts = st.sampled_from(
    ["node1", "node1.dc.example", "node2.dc.example", "node2", "10.0.0.1", "10.0.0.12", "localhost"]
)
_pods = st.sampled_from([{}, {"pod": "p0"}, {"pod": "p0", "namespace": "a"}, {"pod": "p1"}])


@settings(max_examples=200)
@given(
    servers=st.lists(st.tuples(_hosts, st.sampled_from([8000, 30000]), _pods), max_size=6),
    gpus=st.lists(st.tuples(_hosts, st.one_of(st.none(), _hosts), _pods), max_size=10),
    pair=st.booleans(),
)
def test_the_indexed_join_equals_the_scan(
    servers: list[tuple[str, int, dict[str, str]]],
    gpus: list[tuple[str, str | None, dict[str, str]]],
    pair: bool,
) -> None:
    fleet_servers = [_server(f"{h}:{port}", **labels) for h, port, labels in servers]
    fleet_gpus = [
        _gpu(f"{h}:9400", f"U{i}", hostname=name, **labels)
        for i, (h, name, labels) in enumerate(gpus)
    ]
    pairs = (
        [parse_node_pair(f"{servers[0][0]}:{servers[0][1]}={gpus[0][0]}:9400")]
        if (pair and servers and gpus)
        else []
    )
    assert join_gpus(fleet_servers, fleet_gpus, pairs) == _scan_join(
        fleet_servers, fleet_gpus, pairs
    )


def test_a_label_with_brackets_joins_nothing_instead_of_failing() -> None:
    assert host_of("[node:8000") == "" and target_of("[node:8000").startswith(":")
    joins = join_gpus([_server("[bad]]:8000")], [_gpu("x]:9400", "A", hostname="[")])
    assert joins[0].gpus == () and joins[0].via is None


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="aZ09_.-:[]/@ \u00e9", max_size=16))
def test_host_of_a_plain_target_is_what_urlsplit_gives(address: str) -> None:
    """The fast path of ``host_of`` (``name:port``) agrees with urlsplit's hostname."""
    text = address.strip()
    try:
        expected = (urlsplit(text if "://" in text else "http://" + text).hostname or "").lower()
    except ValueError:
        expected = ""
    expected = (
        "127.0.0.1" if expected in ("localhost", "127.0.0.1", "::1", "ip6-localhost") else expected
    )
    assert host_of.__wrapped__(address) == expected
