"""The one exception family of xprc: every user-facing failure derives from `XprError`."""

from __future__ import annotations

import warnings


def printable(text: str) -> str:
    """`text` with each unprintable character (newline, carriage return, escape, ...) written as
    its Python escape: a file name in a message stays on its line and cannot fake another."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


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
    message = printable(message)  # it may quote a file name, a key, a spec's text
    if filename is None and line is None:
        return f"{severity}: {message}"
    where = printable(filename or "<input>")
    if line is None:
        return f"{where}: {severity}: {message}"
    col = column or 1
    text = f"{where}:{line}:{col}: {severity}: {message}"
    if source_line is not None:
        src = source_line.rstrip("\n").expandtabs(1)
        # the caret under the same character once the line's escapes are written out
        pad = len(printable(src[: col - 1]))
        text += f"\n    {printable(src)}\n    {' ' * pad}^"
    return text


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
