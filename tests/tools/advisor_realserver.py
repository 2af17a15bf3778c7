"""The advisor against a real llama-server: predict draft length k'=2 from K=4, then run at 2.

Three real servers of the same target model (tiny GGUF, CPU, greedy, one slot, one thread),
started together so that the machine's other load falls on all three alike, each under its own
closed-loop client sending back-to-back ``/completion`` requests with varied prompts:

* plain (no draft model): specwatch's windows of it give the plain step time (the baseline);
* ``--spec-draft-n-max 4``: specwatch watches its ``/metrics`` the way ``specwatch advise URL``
  does and predicts ``E[L(2)]``, tokens per step, step time and tok/s at k'=2;
* ``--spec-draft-n-max 2``: what it measured, from the server's own counters (``/metrics``
  deltas read here, not through specwatch) and its per-request ``timings``.

Prints predicted against measured. Usage::

    tests/tools/advisor_realserver.py [--seconds 20] [--tokens 256] [--models-dir DIR] [--json]

Needs the binary of ``shared/tools/llama-server/build-llama-server.sh`` (see
``tests/realserver.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specwatch.core.draft_advisor import PlainBaseline, advice_json, advise
from specwatch.core.step_cost import plain_steps
from specwatch.session.advice_watch import Watched, watch_windows
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.metrics.parse import parse_metrics
from tests.realserver import llama_server_binary, running_llama_server

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "that",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "it",
    "this",
    "be",
    "are",
    "or",
    "an",
    "have",
    "not",
    "but",
    "which",
    "they",
    "one",
    "had",
    "were",
    "all",
    "we",
    "can",
    "more",
    "has",
    "there",
    "their",
    "will",
    "been",
    "if",
    "when",
    "who",
    "would",
    "so",
    "river",
    "stone",
    "cloud",
    "green",
    "blue",
    "red",
    "quiet",
    "loud",
    "fast",
    "slow",
    "bright",
    "dark",
    "north",
    "south",
    "east",
    "west",
]
SPEC = "llamacpp:spec_decode_num_"
INTERVAL_S = 0.25


@dataclass
class Load:
    """Back-to-back greedy requests on a thread, with the server's ``timings`` of each."""

    url: str
    tokens: int
    seed: int = 0
    timings: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)

    def _run(self) -> None:
        rng = random.Random(self.seed)
        with httpx.Client(base_url=self.url, timeout=120) as client:
            while not self._stop.is_set():
                prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
                body = {"prompt": prompt, "n_predict": self.tokens, "temperature": 0.0}
                body["cache_prompt"] = False
                try:
                    r = client.post("/completion", json=body)
                    r.raise_for_status()
                    self.timings.append(r.json()["timings"])
                except (httpx.HTTPError, KeyError, ValueError) as e:
                    self.errors.append(str(e))
                    return


def cpu_seconds(url: str) -> float:
    """CPU time the server process has used (user + system), from the start script's pid file;
    a step's CPU time, unlike its wall time, hardly moves with the machine's other load."""
    port = url.rsplit(":", 1)[1]
    pidfile = llama_server_binary().parent.parent / "run" / f"llama-server-{port}.pid"
    fields = Path(f"/proc/{pidfile.read_text().strip()}/stat").read_text().rsplit(")", 1)[1]
    utime, stime = fields.split()[11:13]
    return (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")


def counters(url: str) -> dict[str, float]:
    """The server's speculative and token counters, straight from ``/metrics``, and its CPU
    time."""
    scrape = parse_metrics(httpx.get(url + "/metrics", timeout=30).text)
    names = ["llamacpp:tokens_predicted_total", "llamacpp:tokens_predicted_seconds_total"]
    names += [SPEC + n for n in ("drafts_total", "accepted_tokens_total", "draft_tokens_total")]
    out = {n: scrape.total(n) or 0.0 for n in names}
    out["cpu_s"] = cpu_seconds(url)
    for pos, v in scrape.by_label(SPEC + "accepted_tokens_per_pos_total", "position").items():
        out[f"pos{pos}"] = v
    return out


def measured(
    timings: list[dict[str, Any]], before: dict[str, float], after: dict[str, float]
) -> dict[str, Any]:
    """What the server itself says about a run."""
    gen = sum(t["predicted_n"] - 1 for t in timings)
    ms = sum(t["predicted_ms"] for t in timings)
    accepted = sum(t.get("draft_n_accepted", 0) for t in timings)
    d = {k: after[k] - before.get(k, 0.0) for k in after}
    drafts = d.get(SPEC + "drafts_total", 0.0)
    # every step of the run, the prompt's included (timings count only finished requests)
    all_steps = d["llamacpp:tokens_predicted_total"] - d.get(SPEC + "accepted_tokens_total", 0.0)
    per_pos = [d[k] / drafts for k in sorted(d) if k.startswith("pos")] if drafts else []
    return {
        "requests": len(timings),
        "tok_s": 1000.0 * gen / ms if ms else None,
        "step_ms": ms / (gen - accepted) if gen > accepted else None,
        "tokens_per_step": gen / (gen - accepted) if gen > accepted else None,
        "drafts": drafts,
        "accept_len_drafted": 1.0 + d.get(SPEC + "accepted_tokens_total", 0.0) / drafts
        if drafts
        else None,
        "draft_hit": drafts / (gen - accepted) if drafts and gen > accepted else None,
        "p": per_pos,
        "cpu_ms_per_step": 1000.0 * d["cpu_s"] / all_steps if all_steps > 0 else None,
    }


async def _watch_all(urls: list[str], seconds: float) -> list[Watched]:
    return list(
        await asyncio.gather(
            *(watch_windows(parse_endpoint(u, env={}), seconds, INTERVAL_S) for u in urls)
        )
    )


def run_together(
    ks: list[int | None], seconds: float, tokens: int, models: Path | None = None
) -> list[Run]:
    """Start one server per draft length (``None``: plain), load each with its own closed-loop
    client at the same time, and watch each one's ``/metrics`` the way ``specwatch advise URL``
    does; the machine's load falls on all of them alike."""
    with ExitStack() as stack:
        urls = []
        for k in ks:
            # One thread each: spin-waiting threads stall each other on a shared machine.
            env = {"THREADS": "1"} | ({} if k is None else {"DRAFT_MAX": str(k)})
            env |= {} if models is None else {"MODELS_DIR": str(models)}
            urls.append(
                stack.enter_context(running_llama_server("plain" if k is None else "draft", env))
            )
        loads = [Load(u, tokens, seed=i) for i, u in enumerate(urls)]
        before = [counters(u) for u in urls]
        for load in loads:
            load.start()
        watched = asyncio.run(_watch_all(urls, seconds))
        for load in loads:
            load.stop()
        after = [counters(u) for u in urls]
    for k, load in zip(ks, loads, strict=True):
        if load.errors:
            raise RuntimeError(f"k={k}: {load.errors[0]}")
    return [
        Run(k, measured(load.timings, b, a), w)
        for k, load, b, a, w in zip(ks, loads, before, after, watched, strict=True)
    ]


@dataclass(frozen=True)
class Run:
    """One server's run: its draft length, the server's own figures, specwatch's windows."""

    k: int | None
    measured: dict[str, Any]
    watched: Watched


def advice_doc(run: Run, plain: PlainBaseline) -> dict[str, Any]:
    """What ``specwatch advise URL --json`` says of ``run``'s windows, with ``plain``."""
    doc: dict[str, Any] = {
        "advice": advice_json(advise(run.watched.windows, run.watched.info, plain))
    }
    return doc


def prediction(doc: dict[str, Any], k: int) -> dict[str, Any]:
    """The advisor's figures at ``k`` draft tokens from its JSON."""
    adv = doc["advice"]
    table = adv["acceptance"]
    out: dict[str, Any] = {
        "reason": adv["reason"],
        "k_running": adv["k_running"],
        "drafts": table["drafts"],
        "draft_hit": table["draft_hit"],
        "p": [e["value"] for e in table["p"]],
        "accept_len": table["expected_len"][k - 1] if len(table["expected_len"]) >= k else None,
    }
    bins = [b for b in adv["bins"] if b["options"]]
    if bins:
        main = max(bins, key=lambda b: b["windows"])
        opt = main["options"][k]
        out |= {
            "batch": main["batch"],
            "windows": main["windows"],
            "tokens_per_step": opt["tokens_per_step"],
            "step_ms": {n: 1000.0 * opt["step_s"][n] for n in ("value", "low", "high")},
            "tok_s": opt["tok_s"],
            "best_k": main["best_k"],
            "advised_k": main["advised_k"],
        }
    return out


def check(
    seconds: float, tokens: int, k_big: int = 4, k_small: int = 2, models: Path | None = None
) -> dict[str, Any]:
    """Plain, K=k_big and K=k_small side by side; the advisor's prediction for k_small made
    from the K=k_big server alone, and what the K=k_small server measured."""
    plain, big, small = run_together([None, k_big, k_small], seconds, tokens, models)
    steps = plain_steps(plain.watched.windows)
    baseline = PlainBaseline(steps, "the plain server's /metrics, watched alongside")
    big_doc, small_doc = advice_doc(big, baseline), advice_doc(small, baseline)
    return {
        "plain": plain.measured
        | {"specwatch_step_ms": {str(b): s * 1000 for b, s in steps.items()}},
        f"k{k_big}": {"measured": big.measured, "advisor_at_k": prediction(big_doc, k_big)},
        "predicted": prediction(big_doc, k_small),
        f"k{k_small}": {"measured": small.measured, "advisor_at_k": prediction(small_doc, k_small)},
    }


PREFIXES = {"llama": "llamacpp:spec_decode_num_", "vllm": "vllm:spec_decode_num_"}


VLLM_STEPS = {
    "gen": "vllm:generation_tokens_total",
    "ended": "vllm:request_success_total",
    "itl_s": "vllm:inter_token_latency_seconds_sum",
    "itl_n": "vllm:inter_token_latency_seconds_count",
}


def spec_counters(url: str, prefix: str) -> dict[str, float]:
    """Drafts, accepted drafts and accepted drafts by position, straight from ``/metrics``
    (on vLLM also its generated tokens, finished requests and inter-token latency)."""
    scrape = parse_metrics(httpx.get(url + "/metrics", timeout=30).text)
    out = {n: scrape.total(prefix + n) or 0.0 for n in ("drafts_total", "accepted_tokens_total")}
    if prefix.startswith("vllm"):
        out |= {key: scrape.total(name) or 0.0 for key, name in VLLM_STEPS.items()}
    for pos, v in scrape.by_label(prefix + "accepted_tokens_per_pos_total", "position").items():
        out[f"pos{int(pos):03d}"] = v
    return out


def fixed_load(url: str, prompts: list[str], tokens: int, concurrency: int) -> list[str]:
    """Send every prompt once (greedy, ``tokens`` each) from ``concurrency`` threads; the
    errors."""
    todo = list(reversed(prompts))
    lock = threading.Lock()
    errors: list[str] = []

    def work() -> None:
        with httpx.Client(base_url=url, timeout=300) as client:
            while True:
                with lock:
                    if not todo or errors:
                        return
                    prompt = todo.pop()
                body = {
                    "prompt": prompt,
                    "max_tokens": tokens,
                    "temperature": 0.0,
                    "ignore_eos": True,
                    "cache_prompt": False,
                }
                try:
                    r = client.post("/v1/completions", json=body | _model_of(client))
                    r.raise_for_status()
                except httpx.HTTPError as e:
                    with lock:
                        errors.append(str(e))

    threads = [threading.Thread(target=work, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    return errors


def _model_of(client: httpx.Client) -> dict[str, str]:
    models = client.get("/v1/models").json().get("data") or [{}]
    name = models[0].get("id")
    return {"model": name} if isinstance(name, str) else {}


def prompts_for(n: int, seed: int = 7, reference: str | None = None) -> list[str]:
    """``n`` varied prompts of the tiny models' words, the same for every server.

    With ``reference`` (a greedy output of the model), each prompt carries a slice of it
    between random words: n-gram drafting finds its continuation there for a while, then not,
    as in a prompt that quotes what the answer will repeat.
    """
    rng = random.Random(seed)

    def words(low: int, high: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))

    if reference is None:
        return [words(4, 16) for _ in range(n)]
    ref = reference.split()
    out = []
    for _ in range(n):
        size = rng.randint(min(30, len(ref)), min(90, len(ref)))
        start = rng.randint(0, len(ref) - size)
        out.append(f"{words(2, 6)} {' '.join(ref[start : start + size])} {words(1, 3)}")
    return out


def reference_text(url: str, tokens: int = 400) -> str:
    """The model's greedy continuation of a fixed prompt (the same on every restart)."""
    with httpx.Client(base_url=url, timeout=300) as client:
        body: dict[str, Any] = {"prompt": "the river", "max_tokens": tokens, "temperature": 0.0}
        body |= {"ignore_eos": True, "cache_prompt": False} | _model_of(client)
        r = client.post("/v1/completions", json=body)
        r.raise_for_status()
        text = r.json()["choices"][0]["text"]
    return str(text)


def _spec_run(
    engine: str, mode: str, k: int, prompts: list[str] | int, tokens: int, concurrency: int
) -> dict[str, Any]:
    """One server at draft length ``k`` under the fixed load: the server's own acceptance and
    specwatch's windows of it (watched as ``specwatch advise URL`` does)."""
    from tests.realserver import running_vllm_cpu

    if engine == "vllm":
        server = running_vllm_cpu(mode, max(k, 1))
    elif mode == "ngram":
        size = ("--spec-ngram-simple-size-m", str(k), "--spec-ngram-simple-size-n", "2")
        server = running_llama_server("ngram", {"THREADS": "1"}, size)
    else:
        server = running_llama_server("draft", {"THREADS": "1", "DRAFT_MAX": str(k)})
    with server as url:
        if isinstance(prompts, int):  # n-gram: prompts quoting the model's own output
            prompts = prompts_for(prompts, reference=reference_text(url))
        before = spec_counters(url, PREFIXES[engine])
        box: dict[str, Any] = {}

        def load() -> None:
            box["errors"] = fixed_load(url, prompts, tokens, concurrency)

        t = threading.Thread(target=load, daemon=True)
        t.start()
        watched = asyncio.run(_watch_until(url, t))
        after = spec_counters(url, PREFIXES[engine])
    if box.get("errors"):
        raise RuntimeError(f"{engine} {mode} k={k}: {box['errors'][0]}")
    d = {n: after[n] - before.get(n, 0.0) for n in after}
    drafts = d["drafts_total"]
    per_pos = [d[n] for n in sorted(d) if n.startswith("pos")]
    return {
        "k": k,
        "drafts": drafts,
        "accept_len_drafted": 1.0 + d["accepted_tokens_total"] / drafts if drafts else None,
        "p": [c / drafts for c in per_pos] if drafts else [],
        "watched": watched,
        "prompts": prompts,
    } | (_vllm_steps(d, drafts, concurrency) if engine == "vllm" else {})


def _vllm_steps(d: dict[str, float], drafts: float, batch: int) -> dict[str, Any]:
    """Decode steps from vLLM's own counters: one inter-token-latency observation per request
    per step after its first token, so steps are ``Δitl_count``, their tokens ``Δgeneration −
    Δfinished`` (the first token of each request comes from its prefill), the step time
    ``Δitl_sum / Δitl_count``. Requests of equal length started together run in lockstep, so the
    batch is the load's concurrency nearly throughout."""
    steps, tokens = d["itl_n"], d["gen"] - d["ended"]
    if steps <= 0:
        return {}
    step_s = d["itl_s"] / steps
    per_step = tokens / steps
    return {
        "requests": d["ended"],
        "steps": steps,
        "tokens_per_step": per_step,
        "draft_hit": drafts / steps,
        "step_ms": 1000.0 * step_s,
        "tok_s": batch * per_step / step_s,
    }


async def _watch_until(url: str, load: threading.Thread) -> Watched:
    """Watch ``/metrics`` while ``load`` runs (and one interval after)."""
    from specwatch.sources.detect import detect
    from specwatch.sources.http.client import ServerClient
    from specwatch.sources.watcher import MetricsWatcher

    windows = []
    async with ServerClient(parse_endpoint(url, env={})) as client:
        info = await detect(client)
        watcher = MetricsWatcher(client, info)
        await watcher.scrape()
        while True:
            alive = load.is_alive()
            await asyncio.sleep(INTERVAL_S)
            w = await watcher.scrape()
            if w.dt > 0 and "error" not in w.notes:
                windows.append(w)
            if not alive:
                break
    return Watched(info, tuple(windows))


def restart_check(
    engine: str,
    mode: str,
    k_big: int = 4,
    k_small: tuple[int, ...] = (2, 3),
    requests: int = 24,
    tokens: int = 128,
    concurrency: int = 4,
) -> dict[str, Any]:
    """The server at ``k_big`` under a fixed load, the advisor's E[L(k')] from it, then the
    server restarted at each ``k'`` under the same load: predicted against measured."""
    # vLLM's tiny model cycles through its whole vocabulary: n-gram drafting needs prompts
    # that quote its output; llama.cpp's repeats every 182 tokens, so long answers suffice
    quoting = mode == "ngram" and engine == "vllm"
    first: list[str] | int = requests if quoting else prompts_for(requests)
    big = _spec_run(engine, mode, k_big, first, tokens, concurrency)
    prompts: list[str] = big["prompts"]
    advice = advise(big["watched"].windows, big["watched"].info, None)
    table = advice.acceptance
    out: dict[str, Any] = {
        "engine": engine,
        "mode": mode,
        "K": k_big,
        "drafts": table.drafts,
        "reason": table.reason,
        "k_running": table.k_running,
        "p_at_K": [e.value for e in table.p],
        "server_p_at_K": big["p"],
        "server_accept_len_at_K": big["accept_len_drafted"],
        "at": {},
    }
    for k in k_small:
        small = _spec_run(engine, mode, k, prompts, tokens, concurrency)
        e = table.expected_len[k - 1] if len(table.expected_len) >= k else None
        measured_len = small["accept_len_drafted"]
        out["at"][str(k)] = {
            "predicted": None if e is None else {"value": e.value, "low": e.low, "high": e.high},
            "measured": measured_len,
            "measured_drafts": small["drafts"],
            "measured_p": small["p"],
            "rel_error_accepted": None
            if e is None or measured_len is None
            else (measured_len - e.value) / (e.value - 1.0),
        }
    return out


def vllm_check(
    k_big: int = 4, k_small: int = 2, requests: int = 24, tokens: int = 128, concurrency: int = 4
) -> dict[str, Any]:
    """The vLLM CPU build plain, at ``k_big`` and at ``k_small``, one after the other under the
    same fixed load (draft model): the advisor's prediction for ``k_small`` from the plain
    server's windows (the baseline) and the ``k_big`` server's, against what the ``k_small``
    server's own counters say."""
    prompts = prompts_for(requests)
    runs = {
        k: _spec_run("vllm", "plain" if k == 0 else "draft", k, prompts, tokens, concurrency)
        for k in (0, k_big, k_small)
    }
    steps = plain_steps(runs[0]["watched"].windows)
    baseline = PlainBaseline(steps, "the plain server's /metrics, watched before")

    def doc(k: int) -> dict[str, Any]:
        w = runs[k]["watched"]
        return {"advice": advice_json(advise(w.windows, w.info, baseline))}

    def server(k: int) -> dict[str, Any]:
        return {n: v for n, v in runs[k].items() if n not in ("watched", "prompts")}

    big_doc = doc(k_big)
    return {
        "engine": "vllm",
        "plain": server(0) | {"specwatch_step_ms": {str(b): s * 1000 for b, s in steps.items()}},
        f"k{k_big}": {"measured": server(k_big), "advisor_at_k": prediction(big_doc, k_big)},
        "predicted": prediction(big_doc, k_small),
        f"k{k_small}": {
            "measured": server(k_small),
            "advisor_at_k": prediction(doc(k_small), k_small),
        },
    }


def _est(e: dict[str, float] | None, fmt: str = ".3f") -> str:
    if not e:
        return "—"
    return f"{e['value']:{fmt}} [{e['low']:{fmt}}, {e['high']:{fmt}}]"


def linear(plain: float, at_k: float, k: int = 2, k_running: int = 4) -> float:
    """The advisor's default step model (``core/step_cost.model_step_s``)."""
    return plain + k / k_running * (at_k - plain)


def report(r: dict[str, Any]) -> str:
    """The figures as lines of text."""
    pred, m2, m4 = r["predicted"], r["k2"]["measured"], r["k4"]["measured"]
    a4 = r["k4"]["advisor_at_k"]
    lines = [
        f"plain: {r['plain']['tok_s']:.0f} tok/s, step {r['plain']['step_ms']:.3f} ms "
        f"({r['plain']['requests']} requests); specwatch's baseline by batch (ms): "
        f"{r['plain']['specwatch_step_ms']}",
        f"K=4 measured: {m4['tok_s']:.0f} tok/s, E[L] {m4['accept_len_drafted']:.3f} per drafted "
        f"step, {m4['tokens_per_step']:.3f} per step, step {m4['step_ms']:.3f} ms, draft hit "
        f"{m4['draft_hit']:.3f}, p_i {[round(x, 3) for x in m4['p']]}",
        f"K=4 advisor: {pred['drafts']:.0f} drafts watched, p_i {[round(x, 3) for x in pred['p']]},"
        f" step at K {_est(a4.get('step_ms'))} ms, tok/s at K {_est(a4.get('tok_s'), '.0f')}",
        f"{'':24}{'predicted at k=2 (from K=4)':>36}  {'measured at K=2':>16}",
        f"{'E[L] per drafted step':24}{_est(pred['accept_len']):>36}  "
        f"{m2['accept_len_drafted']:>16.3f}",
        f"{'tokens per step':24}{_est(pred.get('tokens_per_step')):>36}  "
        f"{m2['tokens_per_step']:>16.3f}",
        f"{'step ms':24}{_est(pred.get('step_ms')):>36}  {m2['step_ms']:>16.3f}",
        f"{'tok/s':24}{_est(pred.get('tok_s'), '.0f'):>36}  {m2['tok_s']:>16.0f}",
        "the step model on the servers' own wall figures: plain + 2/4 (K=4 − plain) = "
        f"{linear(r['plain']['step_ms'], m4['step_ms']):.3f} ms",
        f"advisor at K=4: best k {pred.get('best_k')}, advised k {pred.get('advised_k')}"
        + (f"; withheld: {pred['reason']}" if pred["reason"] else ""),
    ]
    if "cpu_ms_per_step" in m2:  # llama.cpp: the server's CPU time, from its pid file
        cpu = [r["plain"]["cpu_ms_per_step"], m4["cpu_ms_per_step"], m2["cpu_ms_per_step"]]
        lines[-2:-2] = [
            f"{'CPU ms per step':24}{'':>36}  {cpu[2]:>16.3f}"
            f"  (plain {cpu[0]:.3f}, K=4 {cpu[1]:.3f})",
            f"the step model on CPU time: {linear(cpu[0], cpu[1]):.3f} ms",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="per run (default 20)")
    ap.add_argument("--tokens", type=int, default=256, help="per request (default 256)")
    ap.add_argument(
        "--models-dir",
        type=Path,
        default=None,
        help="tiny-target.gguf and tiny-draft.gguf from make-tiny-gguf.py (default: the start "
        "script's; e.g. --size medium --agree 0.9, a target big enough to be memory-bound)",
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--restart",
        metavar="ENGINE:MODE",
        default=None,
        help="instead: the restart calibration (llama:draft, llama:ngram, vllm:draft, "
        "vllm:ngram): K=4 under a fixed load, then restarted at 2 and 3; prints JSON",
    )
    ap.add_argument(
        "--engine",
        choices=("llama", "vllm"),
        default="llama",
        help="vllm: the vLLM CPU build plain, at K=4 and at K=2 one after the other under the "
        "same fixed load (--requests, --tokens; 4 at a time) instead of three llama-servers",
    )
    ap.add_argument("--requests", type=int, default=24, help="--restart/--engine vllm: requests")
    a = ap.parse_args(argv)
    try:
        if a.engine == "vllm" and not a.restart:
            r = vllm_check(requests=a.requests, tokens=a.tokens)
            print(orjson.dumps(r, option=orjson.OPT_INDENT_2).decode() if a.json else report(r))
            return 0
        if a.restart:
            engine, _, mode = a.restart.partition(":")
            found = restart_check(engine, mode, requests=a.requests, tokens=a.tokens)
            print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
            return 0
        r = check(a.seconds, a.tokens, models=a.models_dir)
    except BaseException as e:  # pytest.skip from running_llama_server: no binary here
        if type(e).__name__ == "Skipped":
            print(f"advisor_realserver: {e}", file=sys.stderr)
            return 2
        raise
    print(orjson.dumps(r, option=orjson.OPT_INDENT_2).decode() if a.json else report(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
