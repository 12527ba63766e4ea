"""Bindings and scopes: the names visible while the checker walks one context."""

from __future__ import annotations

from dataclasses import dataclass

from xprc.compiler.ast import Loc, Node


@dataclass
class Binding:
    kind: str  # local, loop, param, const, prim, emit
    node: Node
    loc: Loc


class Scope:
    """The names visible in one context (a block, a function body, an activation)."""

    def __init__(self, context: str, locals_: dict | None = None) -> None:
        self.context = context  # "projection", "response", "color", "function", "activation", ...
        self.vars: dict[str, Binding] = dict(locals_ or {})
