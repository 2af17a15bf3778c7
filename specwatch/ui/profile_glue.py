"""The ``P`` key: ask first, then have the session take a profile of the server's steps, and
show where the verify step's time went when it is read (``app`` is the ``SpecwatchApp``,
untyped here because the app imports this module).

The profile itself runs in the live session (``specwatch.session.profile_job``); this module
only asks, words its end and opens the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specwatch.core.sanitize import sanitize_line

if TYPE_CHECKING:
    from specwatch.session.events import ProfileFinished

"""Decode steps a profile asks for (``specwatch profile``'s default)."""


def ask_profile(app: Any) -> None:
    """Stop the profile in progress, or ask whether to start one and start it on yes."""
    from specwatch.ui.modals import ConfirmModal

    session = app.session
    if session is not None and session.profile_running:
        session.cancel_profile()
        app.notify("stopping the profile (the server's profiling session is stopped too)…")
        return
    info = session.server_info() if session is not None else None
    if session is None or info is None:
        app.notify("no server connected: nothing to profile", severity="warning")
        return
    question = (
        f"Profile {app.settings.profile_steps} decode steps of "
        f"{sanitize_line(info.base_url, 120)} with "
        f"{info.dialect.value}'s own profiler?\n"
        "This makes the server do profiling work: its steps run slower while it records, "
        f"and it writes trace files (the profile is kept in {app.settings.snapshot_dir})."
    )

    def answered(yes: bool | None) -> None:
        if yes:
            start_profile(app)

    app.push_screen(ConfirmModal("profile the server?", question), answered)


def start_profile(app: Any) -> None:
    """Start the profile (after the question was answered yes)."""
    from specwatch.session.profile_job import ProfileOptions

    session = app.session
    options = ProfileOptions(steps=app.settings.profile_steps, out_dir=app.settings.snapshot_dir)
    if session is None or session.start_profile(options) is None:
        app.notify("no server connected, or a profile already runs", severity="warning")
        return
    app.model.profile_event(app.model.now, "asking", "asking the server's profiler…")
    app.bench_bar.add_class("-active")


def finished_text(event: ProfileFinished) -> tuple[str, str]:
    """The title and body of a profile's end: its figures and verdict, or why it did not run."""
    from specwatch.core.profile import summary_lines

    if event.summary is None:
        return f"profile {event.outcome}", event.failure or "the profile did not run"
    lines = [*summary_lines(event.summary), "", event.verdict]
    if event.path is not None:
        lines += ["", f"profile saved: {event.path}"]
    if event.save_error:
        lines += ["", event.save_error]
    return "where the step's time goes", "\n".join(lines)


def show_finished(app: Any, event: ProfileFinished) -> None:
    """The profile ended: a refusal in a notice, a profile read in a modal (it needs reading)."""
    from specwatch.ui.modals import TextModal

    words = event.verdict or event.failure or event.outcome
    app.model.profile_event(event.t, "ended", sanitize_line(f"{event.outcome}: {words}", 300))
    title, body = finished_text(event)
    app.profile_report = (title, body)
    if event.summary is None:
        if event.outcome == "stopped":
            app.notify(sanitize_line(body, 300), title=title, timeout=12)
        else:
            app.notify(sanitize_line(body, 300), title=title, severity="error", timeout=12)
        return
    app.push_screen(TextModal(title, body))


__all__ = ["ask_profile", "finished_text", "show_finished", "start_profile"]
