"""The one exception family of xprc: every user-facing failure derives from `XprError`."""

from __future__ import annotations


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
        where = self.filename or "<input>"
        if self.line is None:
            return f"{where}: error: {self.message}"
        col = self.column or 1
        text = f"{where}:{self.line}:{col}: error: {self.message}"
        if self.source_line is not None:
            src = self.source_line.rstrip("\n").expandtabs(1)
            text += f"\n    {src}\n    {' ' * (col - 1)}^"
        return text

    def __str__(self) -> str:
        return self.format()


class DataError(XprError):
    """A malformed input file (PLY, dataset, checkpoint): the message names the file."""

    def __init__(self, path, problem: str) -> None:
        super().__init__(problem, filename=str(path))
