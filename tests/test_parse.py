"""Parsing: the grammar's precedence and forms, and locations on every node."""

import pathlib
import re

import pytest

from xprc.compiler import ast, parse
from xprc.compiler.names import unparse

ROOT = pathlib.Path(__file__).resolve().parent.parent


def expr(text: str) -> ast.Expr:
    spec = parse.parse(f"const c = {text}\n", "t.xpr")
    return spec.items[0].value


@pytest.mark.parametrize("text,canonical", [
    ("a + b * c", "a + b * c"),
    ("(a + b) * c", "(a + b) * c"),
    ("-x^2", "-x ^ 2"),  # power binds tighter than unary minus
    ("2^-1", "2 ^ (-1)"),
    ("a^b^c", "a ^ b ^ c"),
    ("a - b - c", "a - b - c"),
    ("a - (b - c)", "a - (b - c)"),
    ("not a < b and c or d", "not a < b and c or d"),
    ("R^T * x", "R^T * x"),
    ("camera.project(p).x", "camera.project(p).x"),
    ("M[0, 1] + M[1][0]", "M[0, 1] + M[1][0]"),
    ("[[1, 2], [3, 4]]", "[[1, 2], [3, 4]]"),
    ("[i * 2 for i in 0..7]", "[i * 2 for i in 0..7]"),
    ("1e-10 + 2.5E+3 + 0.3", "1e-10 + 2500.0 + 0.3"),
    ("true or false", "true or false"),
    # % (floor modulo) binds like * and /, left to right; unary minus binds tighter
    ("a + b % c * d", "a + b % c * d"),
    ("a % b % c", "a % b % c"),
    ("a % (b % c)", "a % (b % c)"),
    ("-a % 2 * pi", "-a % 2 * pi"),
    ("(a + b) % c^2", "(a + b) % c ^ 2"),
])  # fmt: skip
def test_precedence_and_forms(text, canonical):
    assert unparse(expr(text)) == canonical


def test_numbers_keep_int_or_float():
    assert expr("7").value == 7 and isinstance(expr("7").value, int)
    assert isinstance(expr("7.0").value, float)
    assert isinstance(expr("7e2").value, float)


def test_transpose_is_caret_T():
    e = expr("M^T")
    assert isinstance(e, ast.Transpose) and isinstance(e.operand, ast.Name)


def test_declarations_and_blocks():
    spec = parse.parse(
        "primitive P  # comment\n"
        "param q : quat = normalize(raw)\n"
        "param sh : sh(2)\n"
        "fn f(a, b) = a * b\n"
        "density(g) = exp(-g)\n"
        "projection { x = 1; y = 2\n for i in 0..3 { x = x + i }\n emit a = x, b = y }\n"
        "response { alpha = 0 }\n"
        "color = 1\n",
        "t.xpr",
    )
    kinds = [type(i).__name__ for i in spec.items]
    assert kinds == ["Primitive", "Param", "Param", "Fn", "Fn", "Block", "Block", "Color"]
    assert spec.items[2].type.name == "sh" and spec.items[2].type.arg == 2
    assert spec.items[4].name == "density"
    body = spec.items[5].body
    assert [type(s).__name__ for s in body] == ["Assign", "Assign", "For", "Emit", "Emit"]
    assert body[2].var == "i" and len(body[2].body) == 1
    assert (body[4].name, body[4].loc) == ("b", ast.Loc(8, 14))


def test_locations():
    spec = parse.parse("const k = 1\n\nconst j = k +   2\n", "t.xpr")
    e = spec.items[1].value
    assert spec.items[1].loc == ast.Loc(3, 7)
    assert e.loc == ast.Loc(3, 13)  # the operator
    assert e.left.loc == ast.Loc(3, 11) and e.right.loc == ast.Loc(3, 17)
    assert spec.source_line(3) == "const j = k +   2"


def test_indexed_assignment_target():
    spec = parse.parse("projection { m[1][0] = 2; v[2] = 1 }", "t.xpr")
    a, b = spec.items[0].body
    assert a.name == "m" and len(a.indices) == 2 and len(b.indices) == 1


@pytest.mark.parametrize("path", sorted((ROOT / "specs").glob("*.xpr")), ids=lambda p: p.name)
def test_shipped_specs_parse(path):
    assert parse.parse(path.read_text(), path.name).items


def test_param_clauses():
    spec = parse.parse(
        "param s : vec3 = exp(raw)  lr 5e-3  init nn_distance  role scale\n"
        "param o : scalar init -2 * k\n"
        "const init = 1\n",  # the clause words are not reserved
        "t.xpr",
    )
    s, o, _ = spec.items
    assert [(c.key, unparse(c.value)) for c in s.clauses] == [
        ("lr", "0.005"), ("init", "nn_distance"), ("role", "scale")]  # fmt: skip
    assert s.clauses[0].loc == ast.Loc(1, 28) and s.clauses[2].value.loc == ast.Loc(1, 60)
    assert [(c.key, unparse(c.value)) for c in o.clauses] == [("init", "-2 * k")]


def test_modulo_is_a_binary_operator_located_at_its_sign():
    e = expr("x  % 3")
    assert isinstance(e, ast.Binary) and (e.op, e.loc) == ("%", ast.Loc(1, 14))
    assert isinstance(e.left, ast.Name) and e.right.value == 3


@pytest.mark.parametrize("path", sorted((ROOT / "specs").glob("*.xpr")), ids=lambda p: p.name)
def test_shipped_specs_cite_what_users_have(path):
    """The specs cited ../shared/REFERENCE.md, which is not part of the repository or the
    wheel: they cite papers and this repository's docs/ pages, and every page they name exists."""
    text = path.read_text()
    assert "REFERENCE" not in text and "shared/" not in text
    for page in re.findall(r"docs/[\w./-]+\.md", text):
        assert (ROOT / page).is_file(), page
