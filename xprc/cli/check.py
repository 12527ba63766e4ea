"""`xprc check SPEC [-D NAME=VALUE]...`: check a spec for errors without generating code, and say
how each `cutoff` was derived (closed form, or bisection and its cost)."""

from __future__ import annotations

from ..errors import printable
from .args import read_spec, spec_args

add_arguments = spec_args


def run(args) -> int:
    from ..compiler import driver

    text, name = read_spec(args.spec)
    checked = driver.check_source(text, name, args.defines)  # on the deep-spec stack
    print(printable(f"{args.spec}: ok ({checked.name}, {len(checked.params)} parameters)"))
    for loc, how in checked.derived:  # each derived footprint: which form, and what it costs
        where = f"{loc.file or args.spec}:{loc.line}:{loc.column}"
        print(printable(f"{where}: cutoff: {how}"))
    return 0
