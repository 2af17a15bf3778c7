"""Issue 22 item 9: the figures SGLang gives that specwatch did not show.

Expositions and payloads are hand-written in the shape of the SGLang wheel each test names.
"""

from __future__ import annotations

from typing import Any

import pytest

from specwatch.core.acceptance import refusal
from specwatch.core.server import Dialect, ServerInfo, SpecConfig
from specwatch.sources.detect import detect
from specwatch.sources.dialects.sglang import DIALECT
from specwatch.ui.panes.status import spec_summary
from tests.conftest import FakeServer, text_response

URL = "http://127.0.0.1:30000"


def sglang_info(version: str, ndt: int | None = 4, topk: int | None = 1) -> ServerInfo:
    spec = SpecConfig(
        enabled=True, algorithm="EAGLE3", num_steps=3, num_draft_tokens=ndt, topk=topk
    )
    return ServerInfo(URL, Dialect.SGLANG, version=version, model="m", spec=spec)


# --- (b) per-request drafts acceptance where SGLang counts no accepted drafts ----------------

# 0.4.10.post2 tokenizer_manager.py: the final meta_info carries spec_verify_ct alone
FINAL_0_4_10: dict[str, Any] = {"spec_verify_ct": 4}
# 0.5.3 tokenizer_manager.py: spec_accept_rate over speculative_num_steps, prefill token included
FINAL_0_5_3: dict[str, Any] = {
    "spec_verify_ct": 4,
    "spec_accept_length": 10 / 4,
    "spec_accept_rate": (10 - 4) / (4 * 3),
}


@pytest.mark.parametrize(
    ("version", "final"), [("0.4.10.post2", FINAL_0_4_10), ("0.5.3", FINAL_0_5_3)]
)
def test_drafts_acceptance_from_verify_count(version: str, final: dict[str, Any]) -> None:
    # 10 tokens: 1 from prefill, 4 verify steps each with its bonus token, so 5 accepted
    # drafts out of 4 × (4 − 1) proposed
    notes: dict[str, str] = {}
    length, rate = DIALECT.spec_figures(sglang_info(version), dict(final), 10, notes)
    assert length == pytest.approx(10 / 4)
    assert rate == pytest.approx(5 / 12)
    assert "spec_verify_ct" in notes["draft_acceptance_rate"]


def test_drafts_acceptance_not_derived_for_a_tree() -> None:
    notes: dict[str, str] = {}
    _, rate = DIALECT.spec_figures(
        sglang_info("0.4.10.post2", ndt=8, topk=4), dict(FINAL_0_4_10), 10, notes
    )
    assert rate is None


# --- (d) speculative_eagle_topk in the header; a tree is refused by the advisor -------------

# 0.5.23 /server_info (http_server.py get_server_info: the flat server args)
SERVER_INFO_0_5_23_TREE: dict[str, Any] = {
    "model_path": "meta-llama/Llama-3.1-8B-Instruct",
    "served_model_name": "llama",
    "tp_size": 1,
    "dp_size": 1,
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 5,
    "speculative_eagle_topk": 4,
    "speculative_num_draft_tokens": 8,
    "enable_metrics": True,
    "internal_states": [{"avg_spec_accept_length": 3.4, "last_gen_throughput": 80.0}],
    "version": "0.5.23",
}


async def test_topk_is_read_shown_and_a_tree_refused(fake_server: FakeServer) -> None:
    fake_server.routes.update(
        {
            "GET /v1/models": {
                "object": "list",
                "data": [{"id": "llama", "object": "model", "owned_by": "sglang"}],
            },
            "GET /ready": text_response("ok"),
            "GET /server_info": SERVER_INFO_0_5_23_TREE,
            "GET /metrics": text_response("# TYPE sglang:num_running_reqs gauge\n"),
        }
    )
    async with fake_server.client() as client:
        info = await detect(client)
    assert info.spec.topk == 4
    assert spec_summary(info.spec) == "EAGLE steps 5 topk 4 (tree) draft 8"
    assert "tree drafting (topk=4)" in (refusal(info.spec) or "")
    chain = SpecConfig(enabled=True, algorithm="EAGLE3", num_steps=3, num_draft_tokens=4, topk=1)
    assert spec_summary(chain) == "EAGLE3 steps 3 topk 1 draft 4"
