"""The checker's state, in one object created by `Checker.__init__` (nothing else sets state):
the spec being checked, its declarations as they are collected, the node budget, and what the
checked program reads (the ray, the pinhole intrinsics) and emits per pixel."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xprc.compiler import ast
from xprc.compiler.ast import Loc, Node
from xprc.compiler.check.scopes import Binding


@dataclass
class Context:
    spec: ast.Spec
    defines: dict  # -D overrides, NAME -> number
    consts: dict[str, Binding] = field(default_factory=dict)
    const_values: dict[str, float | int] = field(default_factory=dict)
    params: dict[str, ast.Param] = field(default_factory=dict)
    param_info: dict[str, ast.ParamInfo] = field(default_factory=dict)
    fns: dict[str, ast.Fn] = field(default_factory=dict)
    cameras_decl: ast.Cameras | None = None
    call_stack: list[str] = field(default_factory=list)  # user functions being inlined
    nodes: int = 0  # scalar work so far (names.work), against names.MAX_NODES
    cur_loc: Loc = ast.NOLOC  # where a node over the budget is reported
    uses_ray: bool = False
    pinhole_reads: dict[str, Loc] = field(default_factory=dict)  # camera.fx ... -> first read
    proj_locals: dict[str, Binding] = field(default_factory=dict)  # the projection's locals
    pixel_outputs: dict[str, tuple[Node, Loc]] = field(default_factory=dict)  # response emits
    local_names: list[tuple[Node, str]] = field(default_factory=list)  # value, spec name
    # locals by where they are first assigned (name, block), and which of them are read
    local_defs: dict[Loc, tuple[str, str]] = field(default_factory=dict)
    local_reads: set[Loc] = field(default_factory=set)
    sampling: int = 0  # > 0 inside `sampled()`
    derived: dict[Loc, str] = field(default_factory=dict)  # each `cutoff` call: how it was derived

    @contextmanager
    def sampled(self) -> Iterator[None]:
        """A block where the compiler evaluates the spec's functions at numbers of its own
        choosing (a kernel for `cutoff`, an activation for an `init`): folds there are unchecked."""
        self.sampling += 1
        try:
            yield
        finally:
            self.sampling -= 1
