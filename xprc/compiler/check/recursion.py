"""Recursion among the spec's functions, found before any is inlined: functions are inlined at
each call, so a function that reaches itself again (directly, or through others, or through
`cutoff`, which evaluates `density`) is an error at the call that closes the cycle, checked for
every function, called or not."""

from __future__ import annotations

import dataclasses

from xprc.compiler import ast


def calls(node) -> list[tuple[str, ast.Loc]]:
    """(function name, where) of every call by name in an AST, in source order; `cutoff(...)`
    counts as a call to `density`."""
    found: list[tuple[str, ast.Loc]] = []
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack.extend(reversed(x))
        elif isinstance(x, ast.Call) and isinstance(x.func, ast.Name):
            found.append(("density" if x.func.id == "cutoff" else x.func.id, x.loc))
            stack.extend(reversed(x.args))
        elif dataclasses.is_dataclass(x) and not isinstance(x, (type, ast.Loc)):
            stack.extend(reversed([getattr(x, f.name) for f in dataclasses.fields(x)]))
    return found


def cycle(fns: dict[str, ast.Fn]) -> list[tuple[str, str, ast.Loc]] | None:
    """The first cycle of calls among `fns` (in declaration order), as (caller, callee, where
    the caller calls it) steps, the last step back to the first caller; None without one."""
    edges = {name: [(c, loc) for c, loc in calls(fn.body) if c in fns] for name, fn in fns.items()}
    done: set[str] = set()

    def visit(name: str, path: list) -> list | None:
        for callee, loc in edges[name]:
            step = (name, callee, loc)
            start = next((i for i, (caller, _, _) in enumerate(path) if caller == callee), None)
            if start is not None or callee == name:
                return [*path[start:], step] if start is not None else [step]
            if callee not in done:
                found = visit(callee, [*path, step])
                if found is not None:
                    return found
        done.add(name)
        return None

    for name in fns:
        if name not in done:
            found = visit(name, [])
            if found is not None:
                return found
    return None
