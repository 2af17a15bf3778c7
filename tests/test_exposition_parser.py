"""prometheus_client's parser loads without the rest of the client, and the client stays whole
for whoever imports it afterwards."""

from __future__ import annotations

import json
import subprocess
import sys

EXPOSITION = """# HELP vllm:num_requests_running Running requests.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{model_name="m"} 1234.0
"""


def _run(code: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_parser_loads_without_the_exposition_server() -> None:
    got = _run(
        "import json, sys\n"
        "import specwatch.sources.metrics.prom_filter, specwatch.sources.metrics.prom\n"
        "print(json.dumps({'loaded': sorted(sys.modules)}))\n"
    )
    loaded = set(got["loaded"])  # type: ignore[call-overload]
    assert "prometheus_client.parser" in loaded
    assert not loaded & {
        "prometheus_client.exposition",
        "prometheus_client.process_collector",
        "http.server",
        "wsgiref",
        "socketserver",
    }


def test_the_client_is_whole_for_a_later_user() -> None:
    got = _run(
        "import json\n"
        "from specwatch.sources.metrics.exposition_parser import "
        "text_string_to_metric_families as lean\n"
        "from prometheus_client import CollectorRegistry, Counter, generate_latest\n"
        "import prometheus_client\n"
        "r = CollectorRegistry()\n"
        "Counter('hits', 'h', registry=r).inc(2)\n"
        "try:\n"
        "    prometheus_client.no_such_name\n"
        "    missing = 'found'\n"
        "except AttributeError:\n"
        "    missing = 'AttributeError'\n"
        "print(json.dumps({\n"
        "    'text': generate_latest(r).decode(),\n"
        "    'same_parser': prometheus_client.parser.text_string_to_metric_families is lean,\n"
        "    'registry': type(prometheus_client.REGISTRY).__name__,\n"
        "    'missing': missing,\n"
        "}))\n"
    )
    assert "hits_total 2.0" in str(got["text"])
    assert got["same_parser"] is True
    assert got["registry"] == "CollectorRegistry"
    assert got["missing"] == "AttributeError"


def test_the_lean_parser_reads_as_the_library_does() -> None:
    from prometheus_client.parser import text_string_to_metric_families as library

    from specwatch.sources.metrics.exposition_parser import text_string_to_metric_families as lean

    def families(parse: object) -> list[tuple[str, str, list[tuple[str, dict[str, str], float]]]]:
        return [
            (f.name, f.type, [(s.name, s.labels, s.value) for s in f.samples])
            for f in parse(EXPOSITION)  # type: ignore[operator]
        ]

    assert families(lean) == families(library)
    assert families(lean)[0] == (
        "vllm:num_requests_running",
        "gauge",
        [("vllm:num_requests_running", {"model_name": "m"}, 3.0)],
    )
