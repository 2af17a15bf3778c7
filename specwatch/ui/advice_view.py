"""The draft advisor's view (``a``): the core's advice on the session's recent windows, as text.

The plain baseline is the monitor's own (``--baseline-itl``, ``--baseline`` or the demo's
simulator), flat over batch; without one the view says the advice is withheld and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from specwatch.core.acceptance import windows_words
from specwatch.core.advice_sweep import measured_lines, merge_sweep
from specwatch.core.draft_advisor import advice_lines, advise, flat_baseline
from specwatch.core.draft_syntax import engine_syntax
from specwatch.core.server import MetricsWindow, ServerInfo
from specwatch.ui.model import MonitorModel

if TYPE_CHECKING:
    from textual.app import App

    from specwatch.core.draft_sweep import Sweep

TITLE = "draft advisor"
NO_BASELINE = (
    "advice withheld: no plain-decoding baseline (start specwatch with --baseline-itl MS or "
    "--baseline FILE); speculation's gain is measured against plain decoding of the same "
    "server, which a speculating server never shows"
)


def advice_body(
    info: ServerInfo | None,
    windows: Sequence[MetricsWindow],
    baseline_ms: float | None,
    baseline_source: str = "",
    sweep: Sweep | None = None,
    argv: tuple[str, ...] = (),
) -> str:
    """The advice on ``windows`` of the server ``info`` describes, or why there is none;
    with ``sweep``, its measured points beside the prediction and in place of the model;
    ``argv``: the server's command line, for the engine's own syntax.

    Half an hour of windows takes ~60 ms here: :func:`open_advice` calls it on a thread.
    """
    if info is None:
        return "no server detected yet"
    if not windows:
        return "no /metrics window yet"
    plain = None
    head = [
        f"{windows_words(len(windows))}, the last "
        f"{windows[-1].t - windows[0].t + windows[0].dt:.0f} s"
    ]
    if baseline_ms is not None:
        where = baseline_source or "the monitor's baseline"
        source = f"{where}: {baseline_ms:g} ms at every batch"
        plain = flat_baseline(baseline_ms, windows, source)
    else:
        head.append(NO_BASELINE)
    advice = advise(windows, info, plain, syntax=engine_syntax(info, argv))
    if sweep is None:
        return "\n".join([*head, *advice_lines(advice)])
    swept = merge_sweep(advice, sweep)
    return "\n".join([*head, *advice_lines(swept.advice), *measured_lines(swept)])


def open_advice(app: App[Any], model: MonitorModel, sweep: Sweep | None = None) -> None:
    """Work the advice out on a thread from ``model``'s windows as they are now, then show it."""
    info, windows = model.server, tuple(model.windows)
    ms, source, argv = model.baseline_ms, model.baseline_source, model.server_argv

    def work() -> None:
        from specwatch.ui.modals import TextModal

        body = advice_body(info, windows, ms, source, sweep, argv)
        app.call_from_thread(app.push_screen, TextModal(TITLE, body))

    app.run_worker(work, thread=True, group="advice")


__all__ = ["NO_BASELINE", "TITLE", "advice_body", "open_advice"]
