"""What a spec declares and nothing uses: a parameter no output depends on (it would train with
a zero gradient, silently) and a local that is assigned and never read. Both compile; both are
reported as warnings at their line (`SpecWarning`, raised by the driver)."""

from __future__ import annotations

from xprc.compiler import ast
from xprc.compiler.ast import Loc, Node


def unused(checked: ast.Checked, ctx) -> list[tuple[str, Loc]]:
    """[(message, where)] in spec order: unused parameters, then unread locals."""
    found = []
    used = _used_params(checked)
    for p in checked.params:
        if p.name not in used:
            found.append((
                f"parameter '{p.name}' is never used: no output, response or colour depends on "
                "it, so it would train with a zero gradient",
                ctx.params[p.name].loc,
            ))  # fmt: skip
    for loc, (name, block) in ctx.local_defs.items():
        if loc in ctx.local_reads or (block == "response" and name == "alpha"):
            continue
        found.append((f"'{name}' is assigned but never used", loc))
    return found


def _used_params(checked: ast.Checked) -> set[str]:
    """The parameters the render depends on: those the projection's outputs read, and those
    behind the per-primitive values the response reads."""
    response = _inputs([checked.alpha, *checked.pixel.values()])
    roots = list(checked.outputs.values())
    roots += [checked.prim[n] for kind, n in response if kind == "prim" and n in checked.prim]
    return {name for kind, name in _inputs(roots) if kind == "raw"}


def _inputs(roots) -> set[tuple[str, str]]:
    """The (kind, name) of every `input` node the roots depend on."""
    seen: set[int] = set()
    found: set[tuple[str, str]] = set()
    stack = [r for r in roots if isinstance(r, Node)]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op == "input" and isinstance(node.extra, tuple) and len(node.extra) == 2:
            found.add(node.extra)
        stack.extend(a for a in node.args if isinstance(a, Node))
    return found
