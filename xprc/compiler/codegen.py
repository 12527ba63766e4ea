"""Stage 5: straight-line programs -> the source of a readable Python/JAX module.

printer.py turns each expression into text; this module assembles the module around it: the
header, the interface constants (one per MethodInfo field), and `activate`, `project` and
`response`. The only names in the output that come from the spec are identifiers the checker
accepted (no `__`, no keywords), and they appear as string keys or behind a prefix; everything
else is numbers and our own text. Long stacks and lists take a line an item.
"""

from __future__ import annotations

import re
import textwrap

from xprc.compiler.printer import MAX_LINE, SPECIAL, Printer, ident, literal
from xprc.compiler.simplify import Call, Program, Simplified
from xprc.compiler.symops import CAMERA_CODE
from xprc.method_info import GENERATED

_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9_.+-]")

def safe_filename(name: str) -> str:
    """The spec's file name as it may appear in the generated header: every character outside
    `A-Za-z0-9_.+-` becomes `_` (no quotes, newlines or spaces), at most 80 characters."""
    return _UNSAFE_IN_NAME.sub("_", name)[:80] or "spec"


# ---------------------------------------------------------------------------------------------
# Module assembly


def _input_code(sym, inp) -> str:
    idx = "".join(f", {i}" for i in inp.index)
    if inp.kind == "raw":
        key = repr(ident(inp.name))
        return f"raw[{key}][...{idx}]" if inp.index else f"raw[{key}]"
    if inp.kind == "camera":
        attr = ident(CAMERA_CODE.get(inp.name, inp.name))
        return f"camera.{attr}[{', '.join(map(str, inp.index))}]" if inp.index else f"camera.{attr}"
    if inp.kind == "camera_model":  # static: a Python bool when the module is traced
        return f"camera.model == {ident(inp.name)!r}"
    if inp.kind == "pixel":
        return f"pixel[..., {inp.index[0]}]"
    if inp.kind == "ray_origin":
        return f"ray_origin[..., {inp.index[0]}]"
    if inp.kind == "ray_dir":
        return f"ray_dir[..., {inp.index[0]}]"
    if inp.kind == "attr":
        return f"attrs[..., {inp.index[0]}]"
    raise AssertionError(inp)  # pragma: no cover


_KIND_ORDER = ("camera", "camera_model", "raw", "pixel", "ray_origin", "ray_dir", "attr")


def _body(prog: Program, inputs, printer: Printer, indent="    ") -> list[str]:
    lines = []
    order = sorted(
        prog.inputs,
        key=lambda s: (_KIND_ORDER.index(inputs[s].kind), inputs[s].name, inputs[s].index),
    )
    for s in order:
        lines.append(f"{indent}{ident(s.name)} = {_input_code(s, inputs[s])}")
    for st in prog.body:
        if isinstance(st, Call):
            outs = ", ".join(ident(o.name) for o in st.outs)  # project_valid returns one array
            args = ", ".join(printer(a) for a in st.args)
            if len(indent) + len(outs) + len(args) + len(st.method) + 20 > MAX_LINE:
                args = ", ".join(printer.name(a) for a in st.args)
            lines += printer.flush(indent)
            lines.append(f"{indent}{outs} = camera.{ident(st.method)}({args})")
        else:
            sym, e = st
            text = printer(e)
            lines += printer.flush(indent)
            lines.append(f"{indent}{ident(printer.names.get(sym, sym.name))} = {text}")
    return lines


def _varying(prog: Program, inputs, kinds) -> set:
    """Symbols of `prog` that vary per element (depend on an input of one of `kinds`)."""
    out = {s for s in prog.inputs if inputs[s].kind in kinds}
    for st in prog.body:
        reads = set()
        for e in st.args if isinstance(st, Call) else [st[1]]:
            reads |= e.free_symbols
        if reads & out:
            out |= set(st.outs) if isinstance(st, Call) else {st[0]}
    return out


def _component(e, varying, printer: Printer, like: str) -> str:
    if e.free_symbols & varying:
        return printer(e)
    return f"rt.broadcast({printer(e)}, {like})"


def _stack(items: list[str], axis: int = -1, indent: str = "    ") -> str:
    """`jnp.stack([a, b], -1)`, one item a line when that is too long for one line."""
    one = "jnp.stack([" + ", ".join(items) + f"], {axis})"
    if len(indent) + len(one) + 24 <= MAX_LINE and "\n" not in one:
        return one
    inner = indent + "    "
    return "jnp.stack([\n" + "".join(f"{inner}{it},\n" for it in items) + f"{indent}], {axis})"


def _list(items: list[str], indent: str = "    ", reserve: int = 24) -> str:
    """`[a, b]`, one item a line when that is too long for one line (`reserve`: the room the
    rest of the line needs, e.g. a comment after the list)."""
    one = "[" + ", ".join(items) + "]"
    if len(indent) + len(one) + reserve <= MAX_LINE and "\n" not in one:
        return one
    inner = indent + "    "
    return "[\n" + "".join(f"{inner}{it},\n" for it in items) + f"{indent}]"


def _interface(simplified: Simplified, *, spec_name: str, spec_sha256: str, version: str):
    """The module's constants, one per MethodInfo field (xprc/method_info.py says what each
    holds and the default a module without it gets), in GENERATED order."""
    ch = simplified.lowered.checked
    params = ["("]
    for prm in ch.params:
        tags = ""
        if prm.lr is not None:
            tags += f", lr={literal(prm.lr)}"
        if prm.init is not None:
            if isinstance(prm.init, tuple):  # a random rule: ('normal', 0.0, 0.1)
                items = [repr(ident(prm.init[0]))] + [literal(x) for x in prm.init[1:]]
                init = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
            elif isinstance(prm.init, str):
                init = repr(ident(prm.init))
            else:
                init = literal(prm.init)
            tags += f", init={init}"
        if prm.role is not None:
            tags += f", role={ident(prm.role)!r}"
        if prm.init_raw is not None:
            tags += f", init_raw={literal(prm.init_raw)}"
        params.append(
            f"    ParamSpec({ident(prm.name)!r}, {ident(prm.kind)!r}, {prm.shape!r}, "
            f"{prm.activation!r}, {prm.degree!r}{tags}),"
        )
    params.append(")")
    consts = [f"{ident(k)!r}: {literal(v)}" for k, v in ch.constants.items()]
    pixel = [ident(k) + _channel_suffix(n) for k, n in ch.pixel.items() for n in _channels(n)]
    why = re.sub(r"[^A-Za-z0-9_.()/ ,-]", "_", ch.cameras_why)  # (file names are restricted)
    values = {
        "NAME": repr(ch.name),
        "SPEC_SHA256": repr(spec_sha256),
        "COMPILER_VERSION": repr(version),
        "PARAMS": "\n".join(params),
        "CONSTANTS": _listing("CONSTANTS", "{", consts, "}"),
        "ATTRS": _names("ATTRS", simplified.attrs),
        "NUM_ATTRS": str(len(simplified.attrs)),
        "NUM_FEATURES": str(len(simplified.lowered.project["color"])),
        "USES_RAY": repr(ch.uses_ray),
        "SIGNED_ALPHA": repr(ch.signed),
        "PIXEL_OUTPUTS": _names("PIXEL_OUTPUTS", pixel),
        "CAMERA_MODELS": _names("CAMERA_MODELS", [ident(m) for m in ch.cameras]),
        "CAMERA_MODELS_SOURCE": repr(why),  # declared, or why the default
        "ROLLING_SHUTTER": repr(_calls(simplified.project, "shutter_box")),
        "SPEC_FILE": repr(spec_name),
    }
    assert tuple(values) == GENERATED, "codegen and MethodInfo disagree"
    return [f"{k} = {v}" for k, v in values.items()]


def _calls(prog: Program, method: str) -> bool:
    """Whether `prog` calls camera.<method>."""
    return any(isinstance(st, Call) and st.method == method for st in prog.body)


def _names(constant: str, names) -> str:
    return _listing(constant, "(", [repr(n) for n in names], ")")


HEADER_WIDTH = 100  # the module's constants and header comments stay within this many columns


def _listing(constant: str, open_: str, items: list[str], close: str) -> str:
    """`open_ item, item, close` after `CONSTANT = ` on one line when it fits HEADER_WIDTH,
    else one item per line (a spec with many attributes or constants stays readable)."""
    one = open_ + "".join(f"{item}, " for item in items).rstrip() + close
    if open_ == "{":
        one = open_ + ", ".join(items) + close
    if len(constant) + 3 + len(one) <= HEADER_WIDTH:
        return one
    return open_ + "\n" + "".join(f"    {item},\n" for item in items) + close


def generate(simplified: Simplified, *, spec_name: str, spec_sha256: str, version: str) -> str:
    """The generated module's source text (deterministic: no paths, no timestamps)."""
    spec_name = safe_filename(spec_name)  # a file name is untrusted text: never raw in the output
    out = _header(simplified, spec_name, spec_sha256, version)
    out += _interface(simplified, spec_name=spec_name, spec_sha256=spec_sha256, version=version)
    out.append("")
    out += _activate(simplified)
    out += _project(simplified)
    out += _response(simplified)
    if any(f"{SPECIAL}." in line for line in out):  # erf, gammaln, ...: imported where used
        out.insert(out.index("import jax.numpy as jnp") + 1, f"import {SPECIAL}")
    return "\n".join(out)


def _header(simplified: Simplified, spec_name: str, spec_sha256: str, version: str):
    """Comments (where the module comes from), docstring and imports."""
    ch = simplified.lowered.checked
    consts = ", ".join(f"{ident(k)}={literal(v)}" for k, v in ch.constants.items())
    out = [
        f"# Generated by xprc {version} from {spec_name}. Do not edit: edit the spec and run",
        f"# `xprc compile {spec_name}` again.",
        f"# spec sha256: {spec_sha256}",
    ]
    if ch.defines:
        out.append(
            "# defines: "
            + " ".join(f"-D {ident(k)}={literal(float(v))}" for k, v in ch.defines.items())
        )
    if consts:
        out += textwrap.wrap(consts, HEADER_WIDTH, initial_indent="# constants: ",
                             subsequent_indent="#   ", break_long_words=False)  # fmt: skip
    return out + [
        f'"""{ident(ch.name)}: point-based primitive generated from {spec_name} by xprc."""',
        "",
        "import jax",
        "import jax.numpy as jnp",
        "from jax import lax",
        "",
        "from xprc import runtime as rt",
        "from xprc.runtime import ParamSpec",
        "",
    ]


def _activate(simplified: Simplified) -> list[str]:
    """`activate(raw)`: each parameter's activation (an identity passes the raw array)."""
    inputs, act = simplified.inputs, simplified.activate
    out = [
        "",
        "def activate(raw):",
        '    """raw parameters [N, *shape] -> activated [N, *shape]."""',
    ]
    p = Printer(names=act.names)
    out += _body(act, inputs, p)
    varying = _varying(act, inputs, ("raw",))
    items = []
    for prm in simplified.lowered.checked.params:
        key = repr(ident(prm.name))
        if prm.name in simplified.identity:
            items.append(f"{key}: raw[{key}]")
            continue
        like = f"raw[{key}]" + ("[..." + ", 0" * len(prm.shape) + "]" if prm.shape else "")
        comps = [_component(e, varying, p, like) for e in act.outputs[prm.name]]
        items.append(f"{key}: {_shaped(comps, prm.shape)}")
    out += p.flush()
    return out + _dict_return(items) + [""]


def _project(simplified: Simplified) -> list[str]:
    """`project(raw, camera)`: centre, depth, box, valid, attrs, features (and the ellipse)."""
    ch, inputs, prj = simplified.lowered.checked, simplified.inputs, simplified.project
    ellipse_doc = ", ellipse [N,3] around centre" if "ellipse" in prj.outputs else ""
    out = [
        "",
        "def project(raw, camera):",
        '    """Per primitive, for one camera: centre [N,2], depth [N], box [N,4], valid [N],',
        "    attrs [N,A] (ATTRS order), features [N,C]" + ellipse_doc + '."""',
    ]
    p = Printer(names=prj.names)
    out += _body(prj, inputs, p)
    varying = _varying(prj, inputs, ("raw",))
    first = ch.params[0]
    like = f"raw[{ident(first.name)!r}]" + (
        "[..." + ", 0" * len(first.shape) + "]" if first.shape else ""
    )
    o = prj.outputs

    def comps(name):
        return [_component(e, varying, p, like) for e in o[name]]

    centre, depth, box = comps("centre"), comps("depth"), comps("box")
    valid, attrs, color = comps("valid"), comps("attrs"), comps("color")
    ellipse = comps("ellipse") if "ellipse" in o else None
    out += p.flush()
    out.append(_commented(f"    centre = {_stack(centre)}", _line(ch, "centre")))
    out.append(f"    depth = {depth[0]}" + _line(ch, "depth"))
    out.append(_commented(f"    box = {_stack(box)}", _line(ch, "box")))
    out.append(f"    valid = {valid[0]}" + _line(ch, "valid"))
    out.append("    valid, lost = rt.footprint_checked(valid, centre, depth, box)")
    if attrs:
        out.append(f"    attrs = {_stack(attrs)}")
    else:
        out.append(f"    attrs = jnp.zeros({like}.shape + (0,), {like}.dtype)")
    out.append(_commented(f"    features = {_stack(color)}", _line(ch, "color")))
    ret = '"centre": centre, "depth": depth, "box": box, "valid": valid, "lost": lost, '
    if ellipse:  # optional: culls the box's tiles that miss it (not part of `valid`)
        out.append(_commented(f"    ellipse = {_stack(ellipse)}", _line(ch, "ellipse")))
        ret += '"ellipse": ellipse, '
    ret += '"attrs": attrs, "features": features'
    return out + _dict_return(ret.split(", ")) + [""]


def _response(simplified: Simplified) -> list[str]:
    """`response(pixel, ray_origin, ray_dir, attrs, camera)`: alpha of each (pixel, primitive)
    pair, and the per-pixel outputs where the spec has them (`stack=False`: as a list)."""
    ch, inputs, rsp = simplified.lowered.checked, simplified.inputs, simplified.response
    if any(rsp.outputs[f"pixel_{k}"] for k in ch.pixel):
        header = [
            "def response(pixel, ray_origin, ray_dir, attrs, camera, stack=True):",
            '    """(alpha [...], per-pixel outputs [..., K]) of each (pixel, primitive) pair; '
            "inputs broadcast",
            "    against each other. stack=False: the outputs as a list of K arrays [...], as "
            "the Pallas",
            "    kernels take them (a trailing axis of K would be laid out on the vector "
            'lanes)."""',
        ]
    else:
        header = [
            "def response(pixel, ray_origin, ray_dir, attrs, camera):",
            '    """alpha [...] of each (pixel, primitive) pair; inputs broadcast against each '
            'other."""',
        ]
    out = ["", *header]
    p = Printer(chains=True, names=rsp.names)
    out += _body(rsp, inputs, p)
    varying = _varying(rsp, inputs, ("pixel", "ray_origin", "ray_dir", "attr"))
    alpha = rsp.outputs["alpha"][0]
    text = p(alpha)
    extra = [p(e) for k in ch.pixel for e in rsp.outputs[f"pixel_{k}"]]
    out += p.flush()
    if extra:  # per-pixel outputs: (alpha, [..., K]) on the broadcast shape of the inputs
        out.append(
            "    shape = jnp.broadcast_shapes(pixel.shape[:-1], ray_origin.shape[:-1], "
            "attrs.shape[:-1])"
        )
        comps = [f"jnp.broadcast_to({c}, shape)" for c in extra]
        where = ", ".join(
            f"{ident(k)}:{_line(ch, f'pixel_{k}').removeprefix('  # spec')}" for k in ch.pixel
        )
        out.append(f"    alpha = jnp.broadcast_to({text}, shape)" + _line(ch, "alpha"))
        comment = f"  # {where}"
        lead = "    extra = "
        rest = len(lead) - 4 + len(comment)  # the line beyond `_list`'s own indent
        out.append(_commented(f"{lead}{_list(comps, reserve=rest)}", comment))
        out.append("    return alpha, (jnp.stack(extra, -1) if stack else extra)")
    elif alpha.free_symbols & varying:
        out.append(f"    return {text}" + _line(ch, "alpha"))
    else:
        out.append(f"    return rt.broadcast({text}, pixel[..., 0])" + _line(ch, "alpha"))
    return out + [""]


def _commented(text: str, comment: str) -> str:
    """`comment` at the end of the first line of `text` (a statement over several lines)."""
    first, sep, rest = text.partition("\n")
    return first + comment + sep + rest


def _line(ch, output: str) -> str:
    """`  # spec line N`: where the spec defines an output (numbers only reach the code)."""
    loc = ch.locs.get(output)
    if loc is None or loc.line <= 0:
        return ""
    return f"  # spec line {int(loc.line)}" + (", base spec" if loc.file else "")


def _channels(node) -> list:
    """Component indices of a per-pixel output (scalar: one, vecN: N)."""
    n = getattr(node.type, "n", None)
    return [None] if n is None else list(range(n))


def _channel_suffix(i) -> str:
    return "" if i is None else "." + ("xyzw"[i] if i < 4 else str(i))


def _shaped(comps: list[str], shape: tuple[int, ...], indent: str = "        ") -> str:
    if not shape:
        return comps[0]
    if len(shape) == 1:
        return _stack(comps, -1, indent)
    n = shape[-1]
    inner = indent + "    "
    rows = [_shaped(comps[i : i + n], shape[-1:], inner) for i in range(0, len(comps), n)]
    if len(shape) == 2:
        return _stack(rows, -2, indent)
    raise AssertionError(shape)  # pragma: no cover


def _dict_return(items: list[str]) -> list[str]:
    """`    return {k: v, ...}`, one entry a line when that is too long for one line."""
    one = "    return {" + ", ".join(items) + "}"
    if len(one) <= MAX_LINE and "\n" not in one:
        return [one]
    return ["    return {", *[f"        {it}," for it in items], "    }"]
