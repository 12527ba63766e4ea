# ruff: noqa: E501  (expected messages are written out whole, source lines included)
"""Untrusted spec input (issue 15): each reproduction that used to end in a Python traceback, a
hang or a silently damaged file, with the exact error (or the documented behaviour) now.

Spec text: huge numbers, no `param`, deep expressions and dependent loops, loops whose steps
exceed the node budget, form feeds and line separators in comments. Files: special files and
directories as the spec, bad `-o` targets, the spec itself as the output, file permissions.
File names that inject code are in test_codegen.py (with the audit of generated modules)."""

import os
import pathlib
import stat
import threading

import pytest
from test_errors import BASE, sub

from xprc import cli
from xprc.compiler import driver, parse, printer, spec_file
from xprc.errors import DefineError, MissingOutputError, ParseError, StaticError, XprError

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _message(text: str) -> str:
    with pytest.raises(XprError) as info:
        driver.compile_source(text, "blob.xpr")
    return str(info.value)


def _compiles(text: str) -> str:
    source = driver.compile_source(text, "blob.xpr")
    compile(source, "blob.py", "exec")  # Python accepts the generated module as well
    return source


# ---------------------------------------------------------------------------------------------
# Numbers


def test_huge_integer_literal():
    digits = "9" * 401
    with pytest.raises(ParseError) as info:
        driver.compile_source(sub("const k = 2", f"const k = {digits}"), "blob.xpr")
    _assert_windowed(
        str(info.value),
        "blob.xpr:4:11: error: number too large (more than 308 digits)",
        f"const k = {digits}",
        11,
    )


def test_huge_float_literal():
    assert _message(sub("const k = 2", "const k = 1e400")) == (
        "blob.xpr:4:11: error: number too large (beyond the float64 range)\n"
        "    const k = 1e400\n"
        "              ^"
    )


def test_largest_allowed_integer_literal_compiles():
    # 308 digits pass the float64 digit limit; float32, which renders run in, stops at 3.4e38
    assert "CONSTANTS = {'k': 1e+38}" in _compiles(sub("const k = 2", "const k = 1" + "0" * 38))
    with pytest.raises(ParseError, match=r"blob.xpr:4:11: error: number 10{307} is outside "):
        _compiles(sub("const k = 2", "const k = 1" + "0" * 307))


@pytest.mark.parametrize("value", ["9" * 401, "9" * 5000, "-" + "9" * 401])
def test_huge_integer_define(value):
    with pytest.raises(DefineError) as info:
        driver.compile_source(BASE, "blob.xpr", [f"k={value}"])
    assert str(info.value) == (
        "<command line>: error: -D k: value too large (beyond the float64 range)"
    )
    with pytest.raises(DefineError):
        driver.compile_source(BASE, "blob.xpr", {"k": int(value[:400])})


# ---------------------------------------------------------------------------------------------
# Structure


def test_spec_without_param():
    text = (
        BASE.replace("param means : vec3\n", "")
        .replace("param opacities : scalar = sigmoid(raw)\n", "")
        .replace("camera.world_to_camera(means)", "camera.world_to_camera([0, 0, 1])")
        .replace("opacities *", "0.5 *")
    )
    with pytest.raises(MissingOutputError) as info:
        driver.compile_source(text, "blob.xpr")
    assert str(info.value) == (
        "blob.xpr:1:11: error: the spec declares no 'param' (at least one per-primitive "
        "parameter is needed)\n"
        "    primitive Blob\n"
        "              ^"
    )
    with pytest.raises(MissingOutputError):
        driver.check_source(text, "blob.xpr")


# ---------------------------------------------------------------------------------------------
# Depth: these hit RecursionError before; now they compile, and the result imports.


def _response(expr: str) -> str:
    return sub("  d = pixel - centre", f"  d = {expr}")


@pytest.mark.parametrize("expr", [
    "pixel - centre" + " + pixel" * 500,  # a 500-term sum
    "-" * 500 + "pixel",  # 500 unary minus
    "sin(" * 200 + "pixel" + ")" * 200,  # 200 nested calls
    "(" * 500 + "pixel" + ")" * 500,  # 500 parentheses
])  # fmt: skip
def test_deep_expression_compiles(expr):
    source = _compiles(_response(expr))
    assert "def response(" in source


def test_nested_calls_are_hoisted_below_pythons_bracket_limit():
    """Python refuses 200 nested brackets in one statement: codegen splits deeper ones."""
    source = _compiles(_response("sin(" * 300 + "pixel" + ")" * 300))
    assert "    z_0 = " in source
    assert max(printer._nesting(line) for line in source.splitlines()) < 2 * printer.HOIST_DEPTH


def test_dependent_loop_steps_compile():
    """400 dependent steps (the issue's case) and the documented 1024-step maximum."""
    for n in (400, 1024):
        body = f"  s = pixel.x\n  for i in 0..{n} {{ s = s * 2 }}\n  d = pixel - centre + s"
        _compiles(sub("  d = pixel - centre", body))
    body = "  s = pixel.x\n  for i in 0..1024 { s = sin(s) }\n  d = pixel - centre + s"
    assert _compiles(sub("  d = pixel - centre", body)).count("jnp.sin(") == 1024


def test_too_deep_nesting_is_located():
    brackets = "[" * 3000 + "1" + "]" * 3000
    with pytest.raises(ParseError) as info:
        driver.compile_source(sub("const k = 2", f"const k = {brackets}"), "blob.xpr")
    _assert_windowed(
        str(info.value),
        f"blob.xpr:4:1010: error: expression nested too deeply "
        f"(more than {parse.MAX_DEPTH} levels)",
        f"const k = {brackets}",
        1010,
    )


def _assert_windowed(got: str, first: str, line: str, col: int) -> None:
    """A located error on a long source line: the location line is whole; the source line is
    shown as a window with '...' marks (a 1 MB line must not flood the terminal), and the caret
    sits under the character at `col` of the original line."""
    head, shown, caret = got.split("\n")
    assert head == first
    assert "..." in shown and len(shown) < 200 < len(line)
    assert caret.strip() == "^"
    assert shown[len(caret) - 1] == line[col - 1]


def test_recursion_beyond_the_worker_stack_is_an_xpr_error(monkeypatch):
    """Whatever still recurses too far is a SpecError naming the file, never a traceback."""
    monkeypatch.setattr(driver, "_RECURSION_LIMIT", 50)  # so the default limit (1000) applies
    body = "  s = pixel.x\n  for i in 0..1000 { s = sin(s) }\n  d = pixel - centre + s"
    assert _message(sub("  d = pixel - centre", body)) == (
        "blob.xpr: error: spec is too deeply nested to compile (expressions or dependent loop "
        "steps tens of thousands deep); split it into smaller steps"
    )


def test_worker_restores_recursion_limit_and_stack_size():
    import sys

    limit, size = sys.getrecursionlimit(), threading.stack_size()
    driver.compile_source(BASE, "blob.xpr")
    assert (sys.getrecursionlimit(), threading.stack_size()) == (limit, size)


# ---------------------------------------------------------------------------------------------
# Loop work counts in the node budget (1024^3 empty steps hung before)


def test_nested_empty_loops_trip_the_node_budget():
    loops = "for i in 0..1024 { for j in 0..1024 { for l in 0..1024 { } } }"
    with pytest.raises(StaticError) as info:
        driver.compile_source(
            sub("  d = pixel - centre", f"  {loops}\n  d = pixel - centre"), "blob.xpr"
        )
    assert str(info.value) == (
        "blob.xpr:10:45: error: spec unrolls to too many operations (more than 200000); reduce loop sizes\n"
        f"      {loops}\n"
        f"    {' ' * 44}^"
    )


def test_nested_comprehensions_trip_the_node_budget():
    inner = "sum([sum([1 for l in 0..1024]) for j in 0..1024])"
    text = sub("const k = 2", f"const k = 2\nconst z = sum([{inner} for i in 0..1024])")
    assert _message(text).startswith(
        "blob.xpr:5:25: error: spec unrolls to too many operations (more than 200000)"
    )


# ---------------------------------------------------------------------------------------------
# Line breaks that are not newlines


@pytest.mark.parametrize("brk", ["\x0c", "\u2028", "\x0b", "\x1c", "\x85"])
def test_odd_line_breaks_in_comments_keep_the_caret_line(brk):
    assert _message(sub("const k = 2", f"# a{brk}b\nconst k = 2 $")) == (
        "blob.xpr:5:13: error: unexpected character '$'\n    const k = 2 $\n                ^"
    )


# ---------------------------------------------------------------------------------------------
# Files: the spec


def _spec(tmp_path, name="blob.xpr", text=BASE) -> pathlib.Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _read_error(path) -> str:
    with pytest.raises(XprError) as info:
        driver.read_spec(pathlib.Path(path))
    return str(info.value)


def test_special_files_are_not_read(tmp_path):
    assert _read_error("/dev/zero") == "/dev/zero: error: cannot read spec: not a regular file"
    fifo = tmp_path / "fifo.xpr"
    os.mkfifo(fifo)  # opening it would block until a writer came
    assert _read_error(fifo) == f"{fifo}: error: cannot read spec: not a regular file"
    assert _read_error(tmp_path) == f"{tmp_path}: error: cannot read spec: is a directory"
    missing = tmp_path / "missing.xpr"
    assert _read_error(missing) == f"{missing}: error: cannot read spec: No such file or directory"


def test_spec_size_limit(tmp_path):
    big = tmp_path / "big.xpr"
    big.write_text("#" * spec_file.MAX_SPEC_BYTES + "\n")
    assert _read_error(big) == f"{big}: error: cannot read spec: larger than 1024 KiB"
    ok = _spec(tmp_path, "ok.xpr", BASE + "#" * (spec_file.MAX_SPEC_BYTES - len(BASE) - 1) + "\n")
    assert driver.read_spec(ok).startswith("primitive Blob")


def test_spec_not_utf8(tmp_path):
    bad = tmp_path / "bad.xpr"
    bad.write_bytes(b"primitive \xff\n")
    assert _read_error(bad).startswith(
        f"{bad}: error: cannot read spec: 'utf-8' codec can't decode"
    )


def test_cli_rejects_fifo_spec(tmp_path, capsys):
    fifo = tmp_path / "fifo.xpr"
    os.mkfifo(fifo)
    assert cli.main(["check", str(fifo)]) == 1
    assert capsys.readouterr().err == f"{fifo}: error: cannot read spec: not a regular file\n"


# ---------------------------------------------------------------------------------------------
# Files: the output


def _write_error(spec, out) -> str:
    with pytest.raises(XprError) as info:
        driver.compile_file(spec, out)
    return str(info.value)


def test_output_is_a_directory(tmp_path):
    spec, out = _spec(tmp_path), tmp_path / "out"
    out.mkdir()
    assert _write_error(spec, out) == f"{out}: error: cannot write: is a directory"
    assert list(out.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        "blob.xpr",
        "out",
    ]


def test_output_under_a_file(tmp_path):
    spec = _spec(tmp_path)
    out = tmp_path / "blob.xpr" / "sub" / "m.py"
    assert _write_error(spec, out) == f"{out}: error: cannot write: {spec} is not a directory"
    assert spec.read_text() == BASE


def test_output_is_the_spec(tmp_path, capsys):
    spec = _spec(tmp_path)
    message = (
        f"{spec}: error: refusing to overwrite the spec being compiled; choose another output file"
    )
    assert _write_error(spec, spec) == message
    assert _write_error(spec, tmp_path / "." / "blob.xpr") == message.replace(
        str(spec), str(tmp_path / "." / "blob.xpr")
    )
    assert cli.main(["compile", str(spec), "-o", str(spec)]) == 1
    assert capsys.readouterr().err == message + "\n"
    link = tmp_path / "link.py"
    link.symlink_to(spec)
    assert _write_error(spec, link).endswith(
        "refusing to overwrite the spec being compiled; choose another output file"
    )
    assert spec.read_text() == BASE


def test_output_is_a_special_file(tmp_path):
    spec = _spec(tmp_path)
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    assert _write_error(spec, fifo) == f"{fifo}: error: cannot write: not a regular file"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_output_is_a_device_node(tmp_path):
    """As root, writing over a device node would replace it: refused (a node made here, never
    a real /dev entry)."""
    spec, node = _spec(tmp_path), tmp_path / "null.py"
    try:
        os.mknod(node, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("cannot create a device node here")
    assert _write_error(spec, node) == f"{node}: error: cannot write: not a regular file"
    assert stat.S_ISCHR(os.stat(node).st_mode)


def test_generated_files_get_normal_permissions(tmp_path, monkeypatch):
    spec = _spec(tmp_path)
    old = os.umask(0o022)
    try:
        out = driver.compile_file(spec, tmp_path / "m.py")
        monkeypatch.setenv("XPRC_CACHE_DIR", str(tmp_path / "cache"))
        cached = driver.compile_file(spec)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(cached).st_mode) == 0o644
    assert [p.name for p in tmp_path.glob("*.tmp")] == []


def test_cli_compile_output_errors(tmp_path, capsys):
    spec, out = _spec(tmp_path), tmp_path / "out"
    out.mkdir()
    assert cli.main(["compile", str(spec), "-o", str(out)]) == 1
    assert capsys.readouterr().err == f"{out}: error: cannot write: is a directory\n"
    assert cli.main(["compile", str(spec), "-o", str(out / "m.py")]) == 0
    assert (out / "m.py").read_text().startswith("# Generated by xprc")
    assert [p.name for p in out.iterdir()] == ["m.py"]
    # `-o ''` (an unset `$OUT`) used to print the module to stdout as if -o were absent
    assert cli.main(["compile", str(spec), "-o", ""]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        "error: -o '': empty file name; leave out -o to write to stdout\n",
    )


def test_cli_check_deep_spec(tmp_path, capsys):
    spec = _spec(tmp_path, text=_response("-" * 500 + "pixel"))
    assert cli.main(["check", str(spec)]) == 0
    assert capsys.readouterr().out == f"{spec}: ok (Blob, 2 parameters)\n"


# ---------------------------------------------------------------------------------------------
# LinPrim at zero size: float32 gradients stay finite (the `tiny` floor of the normalising
# length; 1e-12 overflowed float32 in its -4th power and gave NaN gradients)


def _linprim_grads(kind: str, defines=None) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from xprc.camera import Camera

    module = driver.load(ROOT / "specs" / f"linprim_{kind}.xpr", defines)
    n_dist = 3 if kind == "octahedron" else 4
    scales = np.array([0.0, 1e-13, 1e-12, 1e-9, -1e-12], np.float32)  # raw; abs() activates
    n = len(scales)
    params = {
        "means": jnp.tile(jnp.asarray([[0.0, 0.0, 3.0]], jnp.float32), (n, 1)),
        "quats": jnp.tile(jnp.asarray([[0.9, 0.1, -0.3, 0.2]], jnp.float32), (n, 1)),
        "scales": jnp.asarray(np.repeat(scales[:, None], n_dist, axis=1)),
        "opacities": jnp.zeros((n,), jnp.float32),
        "sh": jnp.ones((n, 16, 3), jnp.float32),
    }
    K = np.array([[10.0, 0.0, 8.0], [0.0, 10.0, 6.0], [0.0, 0.0, 1.0]], np.float32)
    cam = Camera(viewmat=np.eye(4, dtype=np.float32), K=K, width=16, height=12)
    rays = jnp.asarray([[0.0, 0.0, 1.0], [0.01, 0.0, 1.0], [0.0, -0.02, 1.0]], jnp.float32)
    rays = jnp.broadcast_to(rays[None], (n, 3, 3))  # through the centre and near it

    def loss(p):
        out = module.project(p, cam)
        attrs = jnp.broadcast_to(out["attrs"][:, None], (n, 3, out["attrs"].shape[1]))
        zeros = jnp.zeros((n, 3, 3), jnp.float32)
        alpha = module.response(zeros[..., :2], zeros, rays, attrs, cam)
        return jnp.sum(alpha) + jnp.sum(out["box"]) + jnp.sum(out["attrs"])

    return jax.jit(jax.grad(loss))(params)


@pytest.mark.parametrize("kind", ["octahedron", "tetrahedron"])
def test_linprim_gradients_finite_at_zero_size(kind):
    import numpy as np

    for name, g in _linprim_grads(kind).items():
        assert np.isfinite(np.asarray(g)).all(), name


def test_linprim_old_floor_gave_nan_gradients():
    """Positive control: with the old floor (-D tiny=1e-12) the octahedron's gradients are NaN
    in float32, so the test above can fail."""
    import numpy as np

    grads = _linprim_grads("octahedron", ["tiny=1e-12"])
    assert not np.isfinite(np.asarray(grads["scales"])).all()


def test_spec_with_a_byte_order_mark_or_classic_mac_line_ends_reads(tmp_path):
    """A UTF-8 BOM (Windows editors) was 'unexpected character'; CR-only line ends made the
    whole spec one comment line ('missing primitive NAME'). CRLF files keep their exact text
    (their sha256 is recorded by trained runs)."""
    text = (ROOT / "specs" / "3dgs.xpr").read_text()
    want = driver.compile_source(text, "3dgs.xpr", None, ROOT / "specs")
    for name, data in (("bom.xpr", b"\xef\xbb\xbf" + text.encode()),
                       ("cr.xpr", text.replace("\n", "\r").encode())):  # fmt: skip
        path = tmp_path / name
        path.write_bytes(data)
        read = spec_file.read_spec(path)
        assert read == text
        got = driver.compile_source(read, "3dgs.xpr", None, ROOT / "specs")
        assert got == want
    crlf = tmp_path / "crlf.xpr"
    crlf.write_bytes(text.replace("\n", "\r\n").encode())
    assert spec_file.read_spec(crlf) == text.replace("\n", "\r\n")


@pytest.mark.parametrize(
    ("value", "becomes"),
    [("1e39", "inf"), ("-4e38", "inf"), ("1e-46", "0"), ("1e-400", "0"), ("1e-44", "0")],
)
def test_define_outside_float32_is_refused(value, becomes):
    """-D eps2d=1e39 rendered an empty image (inf in float32); 1e-400 silently became 0."""
    said = (
        r"outside float32's range .* would be inf\)"
        if becomes == "inf"
        else (r"below float32's smallest normal number .* flush smaller values to 0\)")
    )
    with pytest.raises(DefineError, match=said):
        driver.parse_defines([f"eps2d={value}"])
    # 1e-44 is a float32 subnormal, which XLA flushes to 0: refused like a spec's 1e-44
    assert driver.parse_defines(["eps2d=3e38", "x=1.2e-38", "z=0e9"]) == {
        "eps2d": 3e38, "x": 1.2e-38, "z": 0.0,
    }  # fmt: skip
