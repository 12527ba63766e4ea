"""The checker's outputs: the projection block (and `color`), the response block, and the
outputs a spec must emit, with their types. Part of check.Checker (its `ctx`, `err`, `node`,
`block`, `expr` and `components`)."""

from __future__ import annotations

from xprc.compiler import ast
from xprc.compiler.ast import SCALAR, Loc, Node, ScalarT, VecT
from xprc.compiler.check.scopes import Binding, Scope
from xprc.compiler.names import FOOTPRINTS, OPTIONAL_OUTPUTS, REQUIRED
from xprc.errors import DuplicateError, MissingOutputError, XprTypeError


class OutputChecks:
    def projection(self, proj: ast.Block, color: ast.Color | None):
        """The projection block (and colour, which sees its names): (emits, outputs)."""
        scope = Scope("projection")
        for name, info in self.ctx.param_info.items():
            scope.vars[name] = Binding("param", info.value, self.ctx.params[name].loc)
        emits: dict[str, tuple[Node, Loc]] = {}
        self.block(proj.body, scope, emits, in_loop=False)
        if color is not None:
            if "color" in emits:
                raise self.err(
                    DuplicateError,
                    "'color' is both emitted by the projection (line "
                    f"{emits['color'][1].line}) and declared here",
                    color.loc,
                )
            self.ctx.cur_loc = color.loc
            emits["color"] = (self.expr(color.value, Scope("color", scope.vars)), color.loc)
        self.ctx.proj_locals = {k: b for k, b in scope.vars.items() if b.kind == "local"}
        outputs = self.outputs(proj, emits, [k for k, b in scope.vars.items() if b.kind == "local"])
        return emits, outputs

    def response(self, resp: ast.Block, emits):
        """The response block: (per-primitive values it reads, the alpha binding)."""
        rscope = Scope("response")
        prim_nodes: dict[str, Node] = {}
        for name, info in self.ctx.param_info.items():
            rscope.vars[name] = Binding(
                "prim",
                self.node("input", info.type, extra=("prim", name)),
                self.ctx.params[name].loc,
            )
            prim_nodes[name] = info.value
        for name, (n, loc) in emits.items():
            rscope.vars[name] = Binding(
                "prim", self.node("input", n.type, extra=("prim", name)), loc
            )
            prim_nodes[name] = n
        self.block(resp.body, rscope, None, in_loop=False)
        alpha = rscope.vars.get("alpha")
        if alpha is None or alpha.kind != "local":
            raise self.err(
                MissingOutputError, "response must assign 'alpha'" + self.replaced(resp), resp.loc
            )
        if not isinstance(alpha.node.type, ScalarT):
            raise self.err(
                XprTypeError, f"'alpha' must be scalar, got {alpha.node.type}", alpha.loc
            )
        return prim_nodes, alpha

    @staticmethod
    def replaced(block: ast.Block) -> str:
        """For a derived spec's block that replaced its base's whole: what the base's emitted,
        and how to change single statements instead."""
        if block.replaces is None:
            return ""
        file, line, names = block.replaces
        what = f"emits {', '.join(names)}" if names else "emits nothing"
        if block.kind == "response":
            what = "assigns alpha" + (f" and emits {', '.join(names)}" if names else "")
        return (
            f"; this {block.kind} replaces the whole {block.kind} of {file} (line {line}), "
            f"which {what}: to change single statements, write 'extend {block.kind} {{ ... }}'"
        )

    def outputs(self, proj: ast.Block, emits, local_names=()) -> dict[str, Node]:
        out = {}
        for name, typ in REQUIRED.items():
            if name not in emits:
                hint = (
                    f"; it is assigned but not emitted: write 'emit {name} = ...'"
                    if (name in local_names)
                    else ""
                )
                hint += self.replaced(proj)
                raise self.err(
                    MissingOutputError, f"projection must emit '{name}' ({typ}){hint}", proj.loc
                )
            node, loc = emits[name]
            if ast.plain(node.type) != typ:
                raise self.err(XprTypeError, f"'{name}' must be {typ}, got {node.type}", loc)
            out[name] = node
        found = [n for n in emits if n in FOOTPRINTS]
        if not found:
            raise self.err(
                MissingOutputError,
                "projection must emit a footprint: 'radius' "
                "(scalar), 'radii' (vec2) or 'box' (vec4)" + self.replaced(proj),
                proj.loc,
            )
        if len(found) > 1:
            raise self.err(
                DuplicateError,
                f"projection emits more than one footprint ('{found[0]}' and '{found[1]}')",
                emits[found[1]][1],
            )
        fp = found[0]
        node, loc = emits[fp]
        if ast.plain(node.type) != FOOTPRINTS[fp]:
            raise self.err(XprTypeError, f"'{fp}' must be {FOOTPRINTS[fp]}, got {node.type}", loc)
        if fp == "box":
            out["box"] = node
        else:
            cx, cy = self.components(out["centre"])
            rx, ry = (node, node) if fp == "radius" else self.components(node)
            out["box"] = self.node(
                "pack",
                VecT(4),
                self.node("sub", SCALAR, cx, rx),
                self.node("sub", SCALAR, cy, ry),
                self.node("add", SCALAR, cx, rx),
                self.node("add", SCALAR, cy, ry),
            )
        for name, typ in OPTIONAL_OUTPUTS.items():
            if name in emits:
                node, loc = emits[name]
                if ast.plain(node.type) != typ:
                    raise self.err(XprTypeError, f"'{name}' must be {typ}, got {node.type}", loc)
                out[name] = node
        if "color" not in emits:
            raise self.err(
                MissingOutputError,
                "missing 'color = ...' (or 'emit color = ...' in the projection)",
                Loc(1, 1),
            )
        node, loc = emits["color"]
        if not isinstance(node.type, (ScalarT, VecT)):
            raise self.err(
                XprTypeError, f"'color' must be scalar or a vector, got {node.type}", loc
            )
        out["color"] = node
        return out
