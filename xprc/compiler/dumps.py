"""What `xprc compile --emit STAGE` prints for each stage's output (driver.STAGES): the AST as
an indented tree, the simplified straight-line programs. (The checked IR prints with
ast.format_ir; the generated module is its own text.)"""

from __future__ import annotations

from xprc.compiler import ast, simplify


def spec(s: ast.Spec) -> str:
    """The parsed spec: each top-level declaration as an indented tree."""
    return "\n".join(_dump(item) for item in s.items) + "\n"


def _dump(node, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(node, list):
        return "\n".join(_dump(x, indent) for x in node)
    if not hasattr(node, "__dataclass_fields__"):
        return pad + repr(node)
    fields = [(k, getattr(node, k)) for k in node.__dataclass_fields__ if k != "loc"]
    loc = getattr(node, "loc", None)
    head = f"{pad}{type(node).__name__}" + (f" @{loc.line}:{loc.column}" if loc else "")
    simple = [
        f"{k}={v!r}"
        for k, v in fields
        if not isinstance(v, (list, ast.Expr)) and not hasattr(v, "__dataclass_fields__")
    ]
    lines = [head + (" " + " ".join(simple) if simple else "")]
    for k, v in fields:
        if isinstance(v, list) and v and not all(isinstance(x, tuple) for x in v):
            lines.append(f"{pad}  {k}:")
            lines.append(_dump(v, indent + 2))
        elif isinstance(v, ast.Expr) or (
            hasattr(v, "__dataclass_fields__") and not isinstance(v, ast.Loc)
        ):
            lines.append(f"{pad}  {k}:")
            lines.append(_dump(v, indent + 2))
    return "\n".join(lines)


def programs(s: simplify.Simplified) -> str:
    out = []
    for name, prog in (("activate", s.activate), ("project", s.project), ("response", s.response)):
        out.append(f"{name}:")
        for sym in prog.inputs:
            out.append(
                f"  {sym} <- {s.inputs[sym].kind} {s.inputs[sym].name} {s.inputs[sym].index}"
            )
        for st in prog.body:
            if isinstance(st, simplify.Call):
                out.append(
                    f"  {', '.join(map(str, st.outs))} = camera.{st.method}"
                    f"({', '.join(map(str, st.args))})"
                )
            else:
                out.append(f"  {st[0]} = {st[1]}")
        for k, v in prog.outputs.items():
            out.append(f"  -> {k} = {list(v)}")
    out.append("attrs: " + ", ".join(s.attrs))
    return "\n".join(out) + "\n"
