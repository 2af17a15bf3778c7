"""The verdicts of a comparison, each with its wording and its exit code.

One enumeration for every front end: ``specwatch compare`` exits with :attr:`Outcome.exit_code`,
the TUI shows :attr:`Outcome.wording`, ``--json`` writes the wording. Codes 1 and 2 are taken
(an error, a usage error); a verdict added later takes the next free code (9...) and a line in
the README's table. The rule that picks one is :func:`specwatch.core.judge.judge`.
"""

from __future__ import annotations

from enum import Enum

EXIT_ERROR = 1
"""Something went wrong (e.g. a snapshot with no finished run)."""
EXIT_USAGE = 2
"""The command line, or a file it names, is not usable."""


class Outcome(str, Enum):
    """A comparison's verdict. The value is its wording, so it compares equal to that text."""

    NO_CHANGE = "no significant change"
    GPU = "explained by GPU state"
    CODE = "not explained by GPU state: look at code or configuration"
    UNKNOWN = "GPU state unknown: no SM clock readings to attribute the change"
    LOAD = "load changed"
    ACCEPTANCE = "acceptance changed"
    HOST = "host CPU contention"
    CONFIG = "configuration changed"
    """The server was started with other settings: the two sides are not like for like."""

    @property
    def wording(self) -> str:
        """What the verdict says, as printed."""
        return str(self.value)

    @property
    def exit_code(self) -> int:
        """The exit status of ``specwatch compare`` for this verdict."""
        return _EXIT_CODES[self]

    def worded(self, *, same_code: bool = False) -> str:
        """The wording, knowing whether both sides ran the same code and libraries.

        With the code known to be the same, "look at code" would contradict the line in front
        of it; what is left to look at is named instead.
        """
        if self is Outcome.CODE and same_code:
            return CODE_SAME_CODE_WORDING
        return self.wording

    def __str__(self) -> str:
        return self.wording


CODE_SAME_CODE_WORDING = (
    "not explained by GPU state: look at configuration, load shape, the server's own settings"
)
""":attr:`Outcome.CODE` when both sides ran the same code and libraries."""


_EXIT_CODES: dict[Outcome, int] = {
    Outcome.NO_CHANGE: 0,
    Outcome.GPU: 3,
    Outcome.CODE: 4,
    Outcome.UNKNOWN: 5,
    Outcome.LOAD: 6,
    Outcome.ACCEPTANCE: 7,
    Outcome.CONFIG: 8,
    Outcome.HOST: 9,
}

CAUSES: dict[Outcome | None, str] = {
    Outcome.NO_CHANGE: "no_change",
    Outcome.GPU: "gpu_state",
    Outcome.CODE: "not_gpu_state",
    Outcome.UNKNOWN: "gpu_state_unknown",
    Outcome.LOAD: "load",
    Outcome.ACCEPTANCE: "acceptance",
    Outcome.HOST: "host_cpu",
    Outcome.CONFIG: "configuration",
    None: "not_judged",
}
"""Each verdict as one machine word (the exporter's ``cause`` label, the export's ``cause``
rows); ``not_judged``: warming up, idle, collecting."""


__all__ = ["CAUSES", "CODE_SAME_CODE_WORDING", "EXIT_ERROR", "EXIT_USAGE", "Outcome"]
