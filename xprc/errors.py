"""The one exception family of xprc: every user-facing failure derives from `XprError`."""

from __future__ import annotations

import unicodedata
import warnings


def printable(text: str) -> str:
    """`text` with each unprintable character (newline, carriage return, escape, ...) written as
    its Python escape: a file name in a message stays on its line and cannot fake another."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def cut_to(text: str, limit: int = 60) -> str:
    """`text`, or its first `limit` - 3 characters and '...' when it is longer than `limit`: a
    value quoted in a message (a JSON integer of 4300 digits, a path) stays short."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class XprError(Exception):
    """Base class. Spec errors carry a location and print `FILE:LINE:COL: error: MSG` + caret."""

    def __init__(
        self,
        message: str,
        *,
        filename: str | None = None,
        line: int | None = None,
        column: int | None = None,
        source_line: str | None = None,
    ) -> None:
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        self.source_line = source_line
        super().__init__(self.format())

    def format(self) -> str:
        return located("error", self.message, self.filename, self.line, self.column,
                       self.source_line)  # fmt: skip

    def __str__(self) -> str:
        return self.format()


def located(severity: str, message: str, filename=None, line=None, column=None,
            source_line=None) -> str:  # fmt: skip
    """`FILE:LINE:COL: SEVERITY: MESSAGE` and the source line with a caret (what is known of
    it), every part printable."""
    message = shortened(printable(message))  # it may quote a file name, a key, a spec's text
    if filename is None and line is None:
        return f"{severity}: {message}"
    where = printable(filename or "<input>")
    if line is None:
        return f"{where}: {severity}: {message}"
    col = column or 1
    text = f"{where}:{line}:{col}: {severity}: {message}"
    if source_line is not None:
        shown, pad = caret_window(source_line.rstrip("\n").expandtabs(1), col)
        text += f"\n    {shown}\n    {' ' * pad}^"
    return text


MAX_MESSAGE = 4000  # characters of a message; a longer one (a name of 784 KB) is cut in the middle


def shortened(message: str) -> str:
    """`message`, its middle left out (and counted) when it is longer than `MAX_MESSAGE`."""
    if len(message) <= MAX_MESSAGE:
        return message
    keep = MAX_MESSAGE // 2
    cut = len(message) - 2 * keep
    return f"{message[:keep]}[... {cut:,} characters left out ...]{message[-keep:]}"


# A source line longer than `LONG_LINE` characters (a 784 KB generated one) is cut to a window
# of `CONTEXT_COLUMNS` terminal columns either side of the caret, with `...` marks.
LONG_LINE = 160
CONTEXT_COLUMNS = 60
ELLIPSIS = "..."


def _cell(ch: str) -> tuple[str, int]:
    """`ch` as printed (escaped when unprintable) and the terminal columns it takes: 2 for a
    wide East Asian character, 0 for a combining mark."""
    shown = printable(ch)
    if shown != ch:
        return shown, len(shown)
    if unicodedata.combining(ch):
        return ch, 0
    return ch, 2 if unicodedata.east_asian_width(ch) in "WF" else 1


def caret_window(src: str, col: int) -> tuple[str, int]:
    """Line `src` as shown above a caret at 1-based column `col`, and the terminal columns
    before the character at `col`: the whole line when it is at most `LONG_LINE` characters,
    else at most `CONTEXT_COLUMNS` columns each side of the caret, `...` where the line goes
    on. Only characters near `col` are looked at."""
    i = max(col - 1, 0)
    if len(src) <= LONG_LINE:
        cells = [_cell(ch) for ch in src]
        return "".join(c for c, _ in cells), sum(w for _, w in cells[:i])
    # at most 4 characters per column of budget, so a run of zero-width marks stays bounded
    limit = 4 * CONTEXT_COLUMNS
    left, width = [], 0
    j = min(i, len(src))
    while j > 0 and len(left) < limit:
        shown, w = _cell(src[j - 1])
        if width + w > CONTEXT_COLUMNS:
            break
        left.append(shown)
        width += w
        j -= 1
    right, rwidth = [], 0
    k = i
    while k < len(src) and len(right) < limit:
        shown, w = _cell(src[k])
        if rwidth + w > CONTEXT_COLUMNS and k > i:
            break
        right.append(shown)
        rwidth += w
        k += 1
    head = ELLIPSIS if j > 0 else ""
    tail = ELLIPSIS if k < len(src) else ""
    return head + "".join(reversed(left)) + "".join(right) + tail, len(head) + width


class DataError(XprError):
    """A malformed input file (PLY, dataset, checkpoint): the message names the file."""

    def __init__(self, path, problem: str) -> None:
        super().__init__(problem, filename=str(path))


def warn_data(path, problem: str, stacklevel: int = 2) -> None:
    """A RuntimeWarning about input file `path` (named first, as a DataError names it), for
    what a loader read but could not take as it is; `stacklevel` as `warnings.warn` counts from
    the caller."""
    warnings.warn(f"{printable(str(path))}: {problem}", RuntimeWarning, stacklevel=stacklevel + 1)


class SpecWarning(UserWarning):
    """Something in a spec that compiles but is probably a mistake (a parameter or local that
    nothing uses): `FILE:LINE:COL: warning: MSG` and the line with a caret, as errors are."""

    def __init__(self, message: str, *, filename: str, line: int, column: int,
                 source_line: str | None) -> None:  # fmt: skip
        super().__init__(located("warning", message, filename, line, column, source_line))


class CameraModelError(XprError):
    """A camera whose model the spec does not accept (its `cameras` declaration)."""


class SpecError(XprError):
    """A mistake in a spec (or in the compile options for it); located when possible."""


class ParseError(SpecError):
    """The spec text does not follow the grammar."""


class UnknownNameError(SpecError):
    """An unknown name, function, attribute or type (the message suggests the closest)."""


class DuplicateError(SpecError):
    """Something defined twice: a parameter, constant, function, block or output."""


class ReservedNameError(SpecError):
    """A name the language or the generated Python reserves (keywords, builtins, dunder names)."""


class XprTypeError(SpecError):
    """Operands or arguments of the wrong type or shape (`cannot add vec3 and vec2`)."""


class StaticError(SpecError):
    """A value that must be known at compile time is not, or is out of range (indices, loops)."""


class ScopeError(SpecError):
    """A name used where it is not available (e.g. `pixel` outside the response)."""


class MissingOutputError(SpecError):
    """A required declaration or output is absent (centre, depth, footprint, valid, alpha...)."""


class DefineError(SpecError):
    """A bad `-D NAME=VALUE` override: unknown constant or non-numeric value."""


class ReuseError(SpecError):
    """`extends`: a base spec that is missing, unreadable or cyclic, or a path not allowed."""
