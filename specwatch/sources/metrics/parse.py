"""The ``/metrics`` exposition parsed: in full (:func:`parse_metrics`, never raising), or only
the families specwatch uses (:class:`MetricsReader`); ``prometheus_client`` parses what is kept.

:func:`parse_metrics`: on input the parser rejects, it parses line by line, keeps every sample
it can and says what it dropped in ``Scrape.error``.

A busy vLLM with data-parallel engines exposes hundreds of kilobytes, most of it histograms no
pane reads; ``prometheus_client`` parses about 30 µs per line. :class:`MetricsReader` picks
the lines of the wanted families by name, hands each series it has not met before to
``prometheus_client`` (labels, escaping, the family's ``# TYPE`` line), remembers what it said,
and afterwards only reads the number after a series it knows. A line it cannot read that way
goes to the parser again, so what the parser rejects is still reported as unparseable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from itertools import compress
from operator import ne
from typing import cast

from prometheus_client.parser import text_string_to_metric_families

from specwatch.sources.metrics.prom import Sample, Scrape, make_series_key


def _families(text: str) -> tuple[list[Sample], dict[str, str]]:
    samples: list[Sample] = []
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            labels = dict(s.labels)
            samples.append(Sample(s.name, labels, float(s.value), make_series_key(s.name, labels)))
    return samples, types


def parse_metrics(text: str) -> Scrape:
    """Parse a Prometheus text exposition; never raises.

    When ``prometheus_client`` rejects the text as a whole, every line is parsed on its own
    (with its family's ``# TYPE`` line), so one bad or truncated line costs only itself.
    """
    try:
        samples, types = _families(text)
        return Scrape(tuple(samples), types)
    except Exception as exc:  # the parser raises assorted types on bad input
        first_error = _describe(exc)
    samples = []
    types = {}
    bad: list[str] = []
    type_line: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                type_line[parts[2]] = line
            continue
        name = re.split(r"[\s{]", line, maxsplit=1)[0]
        header = _type_header_for(name, type_line)
        try:
            got, got_types = _families(f"{header}{line}\n")
        except Exception:
            bad.append(line)
            continue
        samples.extend(got)
        for fam, typ in got_types.items():
            types.setdefault(fam, typ)
    error = (
        unparseable_note(bad)
        if bad
        else f"/metrics parse error ({first_error}); recovered line by line"
    )
    return Scrape(tuple(samples), types, error)


def unparseable_note(bad: list[str]) -> str:
    """What a scrape says about the lines it could not parse (``bad`` is not empty)."""
    shown = bad[0]
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{len(bad)} unparseable line(s) in /metrics, first: {shown!r}"


def _type_header_for(name: str, type_line: Mapping[str, str]) -> str:
    for suffix in ("", "_total", "_bucket", "_sum", "_count", "_created"):
        if suffix and not name.endswith(suffix):
            continue
        base = name[: len(name) - len(suffix)] if suffix else name
        for candidate in (base, base + "_total") if suffix != "_total" else (name, base):
            if candidate in type_line:
                return type_line[candidate] + "\n"
    return ""


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 80 else text[:77] + "..."


_KEEP, _SKIP = 1, 0
_SKIPPED, _OTHER = -1, -2
"""A line's slot in :class:`_Layout` when it gave no sample."""
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info", "_gcount", "_gsum")
MAX_SERIES = 50_000
"""Remembered series (and names) at most; a server whose names or label values churn starts
the memory again."""


class MetricsReader:
    """Parses ``/metrics`` bodies keeping only families whose name starts with a wanted prefix.

    One reader serves one server: it remembers the series it has parsed, so the second and
    later scrapes cost a lookup and a ``float()`` per kept line. Never raises.

    Args:
        wanted: Family names or name prefixes (``"vllm:spec_decode_"``) to keep.
    """

    def __init__(self, wanted: Iterable[str]) -> None:
        self.wanted: tuple[str, ...] = tuple(sorted(set(wanted)))
        self._decided: dict[str, int] = {}
        self._series: dict[str, Sample] = {}
        """Series text (the line up to its value) -> the last sample read from it."""
        self._groups: dict[str, _Group] = {}
        """Family -> its group as last read."""
        self._last: _Layout | None = None
        """The last body's lines and what each gave, while the next can be read by a diff."""

    def parse(self, text: str) -> Scrape:
        """The samples of the wanted families in ``text`` (see :class:`Scrape`)."""
        lines = text.split("\n")
        last = self._last
        if last is not None:
            scrape = _diff(lines, last)
            if scrape is not None:
                return scrape
        self._last = None
        return self._read(text, lines)

    def _read(self, text: str, lines: list[str]) -> Scrape:
        """:meth:`parse` reading every group, and noting which line gave which sample."""
        if len(self._series) > MAX_SERIES or len(self._decided) > MAX_SERIES:
            # names or label values that churn (a hostile server) start the memory again
            self._series.clear()
            self._groups.clear()
            self._decided.clear()
        state = _State()
        wanted = self.wanted
        # A family's lines follow its "# TYPE" line as one group (the format requires it), so
        # the text is cut at comment lines and a whole group is kept or skipped at once, by
        # index: copying 400 KB costs more than reading the few groups that are kept.
        end = len(text)
        while end and text[end - 1] == "\n":
            end -= 1
        slots = [_OTHER] * len(lines)
        families = [""] * len(lines)
        line_no = 0
        counted = 0
        i = 0
        while i < end:
            nxt = text.find("\n#", i, end)
            stop = end if nxt < 0 else nxt
            family = ""
            if text[i] == "#":
                nl = text.find("\n", i, stop)
                head = text[i:stop] if nl < 0 else text[i:nl]
                body = stop if nl < 0 else nl + 1
                if head.startswith("# TYPE "):
                    parts = head.split(None, 3)
                    if len(parts) == 4:
                        family = parts[2]
                        state.declared.add(family)
                        if family.startswith(wanted):
                            state.type_lines[family] = head
            else:
                body = i
            i = stop + 1
            if body >= stop:
                continue
            line_no += text.count("\n", counted, body)
            counted = body
            first = line_no
            last_line = first + text.count("\n", body, stop) + 1
            if family and family.startswith(wanted):
                offset = len(state.samples)
                if self._wanted_group(family, text[body:stop], state):
                    got = len(state.samples) - offset
                    slots[first : first + got] = range(offset, offset + got)
            elif family and last_line - first == text.count("\n" + family, body - 1, stop):
                # every line of the group is of this family, which nothing reads
                slots[first:last_line] = [_SKIPPED] * (last_line - first)
                families[first:last_line] = [family] * (last_line - first)
            else:
                for line in text[body:stop].split("\n"):
                    self._line(line, state)
        types = {
            _family_name(fam, line): line.split(None, 3)[3].strip()
            for fam, line in state.type_lines.items()
        }
        error = unparseable_note(state.bad) if state.bad else None
        self._last = _Layout(lines, slots, families, state.samples, types, error)
        return Scrape(tuple(state.samples), dict(types), error)

    def _wanted_group(self, family: str, body: str, state: _State) -> bool:
        """A wanted family's group. Most lines read as they did at the last scrape (idle
        engines, settled buckets): those keep their samples, found by comparing the lines in
        C; only the lines that changed are read, and only while their series stay the same.

        ``True`` when each line gave one sample, in order (a blank last line aside)."""
        lines = body.split("\n")
        if not lines[-1]:
            lines.pop()
        last = self._groups.get(family)
        if last is not None and len(last.lines) == len(lines):
            samples = _changed_values(lines, last)
            if samples is not None:
                self._groups[family] = _Group(lines, last.series, samples)
                state.samples.extend(samples)
                return True
        read = self._wanted_lines(lines, state)
        if read is None:
            self._groups.pop(family, None)
            return False
        self._groups[family] = _Group(lines, [ln.rpartition(" ")[0] for ln in lines], read)
        return True

    def _wanted_lines(self, lines: list[str], state: _State) -> list[Sample] | None:
        """The lines of a wanted family: a lookup and a ``float()`` for each known series.

        Done for the whole group at once; any line the shortcut cannot take sends the group
        line by line to :meth:`_line` (and returns ``None``).
        """
        split = [line.rpartition(" ") for line in lines]
        cache = self._series
        series = [parts[0] for parts in split]
        known = [cache.get(name) for name in series]
        numbers = [parts[2] for parts in split]
        values: list[float] | None = None
        if None not in known and "_" not in "".join(numbers):
            try:
                values = [float(n) for n in numbers]
            except ValueError:
                values = None
        if values is None:
            for line in lines:
                self._line(line, state)
            return None
        make = tuple.__new__
        # A series whose value did not move keeps its sample (idle engines, settled buckets).
        found = cast("list[Sample]", known)  # no None in it: checked above
        samples = [
            k if k[2] == v else make(Sample, (k[0], k[1], v, k[3]))
            for k, v in zip(found, values, strict=True)
        ]
        cache.update(zip(series, samples, strict=True))
        state.samples.extend(samples)
        return samples

    def _line(self, line: str, state: _State) -> None:
        """One line the fast path could not take: decide by name, parse with the parser."""
        if not line or line[0] == "#":
            return
        if line[0] in " \t" or "\t" in line or line[-1] == " ":
            line = " ".join(line.split())
            if not line:
                return
        space = line.find(" ")
        brace = line.find("{", 0, space) if space > 0 else line.find("{")
        end = brace if brace >= 0 else space
        name = line[:end] if end >= 0 else line
        decision = self._decided.get(name)
        if decision is None:
            if name.startswith(self.wanted):
                decision = self._decided[name] = _KEEP
            elif _family_declared(name, state.declared):
                decision = self._decided[name] = _SKIP
            elif self._parse_line(line, name, state, keep=False):
                # not ours and in no declared family, but the parser takes it
                self._decided[name] = _SKIP
                return
            else:
                state.bad.append(line)
                return
        if decision == _KEEP and not self._parse_line(line, name, state, keep=True):
            state.bad.append(line)

    def _parse_line(self, line: str, name: str, state: _State, keep: bool) -> bool:
        """Parse one line with ``prometheus_client``; ``False`` when it rejects the line."""
        header = _type_line_for(name, state.type_lines)
        try:
            families = list(text_string_to_metric_families(f"{header}{line}\n"))
        except Exception:  # the parser raises assorted types on bad input
            return False
        if not keep:
            return True
        got = [s for family in families for s in family.samples]
        for s in got:
            labels = dict(s.labels)
            key = make_series_key(s.name, labels)
            sample = Sample(s.name, labels, float(s.value), key)
            if s.name.startswith(self.wanted):
                state.samples.append(sample)
            if len(got) == 1 and s.timestamp is None:
                # what precedes the last space of the line is the series, the rest its value
                self._series[line.rpartition(" ")[0]] = sample
        return True


class _Group:
    """A wanted family's lines, their series (each line up to its value) and samples."""

    __slots__ = ("lines", "samples", "series")

    def __init__(self, lines: list[str], series: list[str], samples: list[Sample]) -> None:
        self.lines = lines
        self.series = series
        self.samples = samples


def _changed_values(lines: list[str], last: _Group) -> list[Sample] | None:
    """``last``'s samples with the changed lines' values read; ``None`` when a changed line
    is not a known series followed by a plain number (the caller reads the group afresh)."""
    samples = list(last.samples)
    series = last.series
    make = tuple.__new__
    for i in compress(range(len(lines)), map(ne, lines, last.lines)):
        name, _, number = lines[i].rpartition(" ")
        if name != series[i] or "_" in number:
            return None
        try:
            value = float(number)
        except ValueError:
            return None
        k = samples[i]
        samples[i] = make(Sample, (k[0], k[1], value, k[3]))
    return samples


class _Layout:
    """The last body read: its lines and what each line gave.

    ``slots[i]`` is the index in ``samples`` of the sample line ``i`` gave, :data:`_SKIPPED`
    for a line of a skipped group (of family ``families[i]``), or :data:`_OTHER` (a comment,
    a blank line, a line read on its own): a change there means reading the body afresh.
    """

    __slots__ = ("error", "families", "lines", "samples", "slots", "types")

    def __init__(
        self,
        lines: list[str],
        slots: list[int],
        families: list[str],
        samples: list[Sample],
        types: dict[str, str],
        error: str | None,
    ) -> None:
        self.lines = lines
        self.slots = slots
        self.families = families
        self.samples = samples
        self.types = types
        self.error = error


def _diff(lines: list[str], last: _Layout) -> Scrape | None:
    """The scrape of a body that differs from the last one only in sample values, found by
    comparing the lines and reading just the changed ones; ``None`` otherwise.

    A changed line must still be the same series followed by a plain number, or a line of a
    skipped group that still starts with its family (it was never parsed, and is not now).
    """
    old = last.lines
    if len(lines) != len(old):
        return None
    slots = last.slots
    samples = last.samples
    copied = False
    for i in compress(range(len(lines)), map(ne, lines, old)):
        slot = slots[i]
        line = lines[i]
        if slot >= 0:
            name, _, number = line.rpartition(" ")
            if "_" in number or name != old[i].rpartition(" ")[0]:
                return None
            try:
                value = float(number)
            except ValueError:
                return None
            if not copied:
                samples = list(samples)
                copied = True
            known = samples[slot]
            samples[slot] = Sample(known.name, known.labels, value, known.key)
        elif slot == _OTHER or not line.startswith(last.families[i]):
            return None
    last.lines = lines
    last.samples = samples
    return Scrape(tuple(samples), dict(last.types), last.error)


class _State:
    """What one :meth:`MetricsReader.parse` gathers."""

    __slots__ = ("bad", "declared", "samples", "type_lines")

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.type_lines: dict[str, str] = {}
        self.declared: set[str] = set()
        self.bad: list[str] = []


def _family_declared(name: str, declared: set[str]) -> bool:
    if name in declared:
        return True
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            if base in declared or base + "_total" in declared:
                return True
    return False


def _type_line_for(name: str, type_lines: dict[str, str]) -> str:
    if name in type_lines:
        return type_lines[name] + "\n"
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            for candidate in (base, base + "_total"):
                if candidate in type_lines:
                    return type_lines[candidate] + "\n"
    return ""


def _family_name(declared_name: str, type_line: str) -> str:
    """The family name as ``prometheus_client`` gives it (a counter's ``_total`` dropped)."""
    if type_line.split(None, 3)[3].strip() == "counter" and declared_name.endswith("_total"):
        return declared_name[: -len("_total")]
    return declared_name


__all__ = ["MAX_SERIES", "MetricsReader", "parse_metrics", "unparseable_note"]
