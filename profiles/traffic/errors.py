"""Errors that name row, column and value: `Problem` (one bad cell or a whole-file problem) and `TrafficError`
(the upload cannot become a profile), both cut to MAX_MESSAGE_CHARS whatever the file holds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from profiles.traffic.limits import MAX_MESSAGE_CHARS, MAX_VALUE_CHARS


def short_value(v: Any) -> str:
    """repr of a cell value, cut to MAX_VALUE_CHARS (a 50 MB binary line is never echoed)."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v[: MAX_VALUE_CHARS + 1])
        r = repr(b[:MAX_VALUE_CHARS])
        return r + (f"... ({len(v):,} bytes)" if len(v) > MAX_VALUE_CHARS else "")
    if isinstance(v, str) and len(v) > MAX_VALUE_CHARS:
        return repr(v[:MAX_VALUE_CHARS]) + f"... ({len(v):,} characters)"
    r = repr(v)
    return r if len(r) <= MAX_VALUE_CHARS + 2 else r[:MAX_VALUE_CHARS] + "..."


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Problem:
    """One bad cell (or a whole-file problem when row/column are None)."""

    row: int | None  # 1-based data row (the header is not counted)
    column: str | None
    value: Any
    expected: str
    line: int | None = None  # 1-based line of the file (CSV, JSONL) or sheet row (xlsx)
    line_kind: str = "line"

    def __str__(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row:,}" if self.row >= 10_000 else f"row {self.row}")
            if self.line:
                where[-1] += f" ({self.line_kind} {self.line})"
        if self.column is not None:
            where.append(f"column '{clip(str(self.column), 80)}'")
        head = ", ".join(where)
        val = "" if self.value is None and self.row is None else f"value {short_value(self.value)}: "
        text = f"{head}: {val}expected {self.expected}" if head else f"{val}expected {self.expected}"
        return clip(text)


class TrafficError(ValueError):
    """An upload that cannot become a profile; `problems` lists each bad row / column / value."""

    def __init__(self, problems: list[Problem], total: int | None = None, at_least: bool = False):
        self.problems = problems
        self.total = total if total is not None else len(problems)
        self.at_least = at_least  # the count stopped early: total is a lower bound
        more = (f" (and {'at least ' if at_least else ''}{self.total - 1:,} more problems)" if self.total > 1
                else "")
        super().__init__(f"{problems[0]}{more}")


def fail(expected: str, *, row: int | None = None, column: str | None = None, value: Any = None,
          line: int | None = None, line_kind: str = "line") -> TrafficError:
    return TrafficError([Problem(row, column, value, expected, line, line_kind)])


def listing(names: Iterable[str], limit: int = 12) -> str:
    names = list(names)
    shown = ", ".join(clip(str(n), 40) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
