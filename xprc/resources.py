"""Where the grammar and the shipped specs are, in a checkout and in an installed wheel.

The repository keeps `grammar/` and `specs/` at its top; the wheel ships them inside the package
as `xprc/grammar` and `xprc/specs` (setup.py maps them). An editable install or a checkout finds
them next to the package instead.

A spec argument (`xprc.load(...)`, `--spec`) that is a bare shipped name (`3dgs`) names the
shipped spec (with a warning when a file NAME.xpr is in the current folder); `NAME.xpr` is the
user's file when one exists there, else the shipped spec; a path with a slash, or another
existing file, is a path. Anything else is an error that lists the
shipped names.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from .errors import XprError, printable

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """`grammar` or `specs`: inside the installed package, else at the top of the checkout."""
    inside = _PACKAGE / name
    return inside if inside.is_dir() else _PACKAGE.parent / name


GRAMMAR_PATH = data_dir("grammar") / "xpr.lark"
SPECS_DIR = data_dir("specs")
DEFAULT_SPEC_NAME = "3dgs"


def shipped_specs() -> dict[str, Path]:
    """Shipped spec name (file stem) -> path, sorted by name."""
    return {p.stem: p for p in sorted(SPECS_DIR.glob("*.xpr"))}


def spec_path(spec) -> Path:
    """A user's path or a shipped spec's name -> the spec file's path.

    A bare shipped name (`3dgs`, the CLI's default) always means the shipped spec, whatever is
    in the current folder (a run folder called `3dgs` is not a spec), with a warning when a
    file NAME.xpr is there (`xprc check ges` beside the user's own ges.xpr would otherwise
    check the shipped spec without a word); `NAME.xpr` is the user's file when one exists
    there, else the shipped spec; anything with a slash is a path."""
    path = Path(spec)
    text = str(spec)
    if "/" in text or "\\" in text:
        return path  # a path: reading a missing one reports 'cannot read spec' with the path
    shipped = shipped_specs()
    if text in shipped:
        if Path(text + ".xpr").is_file():
            warnings.warn(
                printable(
                    f"'{text}' is the shipped spec {shipped[text]}, not ./{text}.xpr here: "
                    f"give {text}.xpr (with its .xpr) for the file here"
                ),
                UserWarning,
                stacklevel=1,  # from here: a command that asks twice shows it once
            )
        return shipped[text]
    if path.exists() and (path.is_file() or not text.endswith(".xpr")):
        return path
    stem = text.removesuffix(".xpr")
    if stem in shipped:
        return shipped[stem]
    if text.endswith(".xpr") or path.exists():
        return path
    hint = ""
    if Path(text + ".xpr").is_file():  # `xprc check ges` beside ges.xpr: a file needs its .xpr
        hint = f"; did you mean {text}.xpr (./{text}.xpr, the file here)?"
    raise XprError(
        f"no spec file '{text}' and no shipped spec of that name{hint} "
        f"(shipped: {', '.join(shipped) or 'none'})",
        filename=text,
    )
