# ruff: noqa: E501  (the table holds full error messages, source lines included)
"""A table of broken specs: each must raise its XprError subclass with exactly this message,
location, source line and caret (the whole text the user sees)."""

import pytest

from xprc.compiler import driver
from xprc.errors import (
    DefineError,
    DuplicateError,
    MissingOutputError,
    ParseError,
    ReservedNameError,
    ScopeError,
    StaticError,
    UnknownNameError,
    XprError,
    XprTypeError,
)

BASE = """primitive Blob
param means : vec3
param opacities : scalar = sigmoid(raw)
const k = 2
projection {
  p = camera.world_to_camera(means)
  emit centre = camera.project(p), depth = p.z, radius = 3.0, valid = p.z > camera.near
}
response {
  d = pixel - centre
  alpha = min(0.99, opacities * exp(-dot(d, d)))
}
color = [1, 1, 1]
"""


def sub(old, new):
    assert old in BASE, old
    return BASE.replace(old, new, 1)


# (id, spec text, exception class, full message)
CASES = [
    # syntax
    (
        "missing_rhs",
        sub("p = camera.world", "p = \n  camera.world").replace("p = \n", "p = ;\n"),
        ParseError,
        "blob.xpr:6:7: error: unexpected ';' (expected '(', '+', '-', '[', a name, a number)\n"
        "      p = ;\n"
        "          ^",
    ),
    (
        "bad_char",
        sub("const k = 2", "const k = 2 $"),
        ParseError,
        "blob.xpr:4:13: error: unexpected character '$'\n    const k = 2 $\n                ^",
    ),
    (
        "quote_in_name",
        sub("param means", "param me'ans"),
        ParseError,
        "blob.xpr:2:9: error: unexpected character '''\n    param me'ans : vec3\n            ^",
    ),
    (
        "backslash",
        sub("const k = 2", "const k\\\\x = 2"),
        ParseError,
        "blob.xpr:4:8: error: unexpected character '\\'\n    const k\\\\x = 2\n           ^",
    ),
    (
        "unclosed_brace",
        BASE.replace("}\nresponse", "\nresponse", 1),
        ParseError,
        "blob.xpr:9:1: error: unexpected 'response' (expected ',', ';', 'emit', 'for', '}', a name)\n"
        "    response {\n"
        "    ^",
    ),
    (
        "eof",
        BASE + "param",
        ParseError,
        "blob.xpr:14:6: error: unexpected end of file (expected a name)\n    param\n         ^",
    ),
    (
        "chained_compare",
        sub("p.z > camera.near", "0 < p.z < 1"),
        ParseError,
        "blob.xpr:7:79: error: unexpected '<'\n"
        "      emit centre = camera.project(p), depth = p.z, radius = 3.0, valid = 0 < p.z < 1\n"
        "                                                                                  ^",
    ),
    (
        "bad_type_arg",
        sub("param means : vec3", "param means : sh(1.5)"),
        ParseError,
        "blob.xpr:2:18: error: expected an integer, got '1.5'\n"
        "    param means : sh(1.5)\n"
        "                     ^",
    ),
    (
        "keyword_as_name",
        sub("d = pixel", "for = pixel"),
        ParseError,
        "blob.xpr:10:7: error: unexpected '=' (expected a name)\n"
        "      for = pixel - centre\n"
        "          ^",
    ),
    (
        "float_trailing_dot",
        sub("radius = 3.0", "radius = 3."),
        ParseError,
        "blob.xpr:7:60: error: unexpected ',' (expected a name)\n"
        "      emit centre = camera.project(p), depth = p.z, radius = 3., valid = p.z > camera.near\n"
        "                                                               ^",
    ),
    # names
    (
        "unknown_name",
        sub("opacities * exp", "opactiy * exp"),
        UnknownNameError,
        "blob.xpr:11:21: error: unknown name 'opactiy' (did you mean 'opacities'?)\n"
        "      alpha = min(0.99, opactiy * exp(-dot(d, d)))\n"
        "                        ^",
    ),
    (
        "unknown_function",
        sub("exp(-dot", "expp(-dot"),
        UnknownNameError,
        "blob.xpr:11:33: error: unknown function 'expp' (did you mean 'exp'?)\n"
        "      alpha = min(0.99, opacities * expp(-dot(d, d)))\n"
        "                                    ^",
    ),
    (
        "unknown_camera_attr",
        sub("camera.near", "camera.nea"),
        UnknownNameError,
        "blob.xpr:7:84: error: unknown camera attribute 'nea' (did you mean 'near'?)\n"
        "      emit centre = camera.project(p), depth = p.z, radius = 3.0, valid = p.z > camera.nea\n"
        "                                                                                       ^",
    ),
    (
        "unknown_camera_method",
        sub("camera.project(p)", "camera.projct(p)"),
        UnknownNameError,
        "blob.xpr:7:24: error: unknown camera method 'projct' (did you mean 'project'?)\n"
        "      emit centre = camera.projct(p), depth = p.z, radius = 3.0, valid = p.z > camera.near\n"
        "                           ^",
    ),
    (
        "unknown_component",
        sub("depth = p.z", "depth = p.q"),
        UnknownNameError,
        "blob.xpr:7:46: error: vec3 has no component '.q'\n"
        "      emit centre = camera.project(p), depth = p.q, radius = 3.0, valid = p.z > camera.near\n"
        "                                                 ^",
    ),
    (
        "unknown_type",
        sub("param means : vec3", "param means : vec"),
        UnknownNameError,
        "blob.xpr:2:15: error: unknown type 'vec' (did you mean 'vec4'?)\n"
        "    param means : vec\n"
        "                  ^",
    ),
    (
        "unknown_ray_attr",
        sub("d = pixel - centre", "d = ray.dirr"),
        UnknownNameError,
        "blob.xpr:10:11: error: unknown ray attribute 'dirr' (did you mean 'dir'?)\n"
        "      d = ray.dirr\n"
        "              ^",
    ),
    (
        "pixel_in_projection",
        sub("depth = p.z", "depth = pixel.x"),
        ScopeError,
        "blob.xpr:7:44: error: 'pixel' is only available in the response\n"
        "      emit centre = camera.project(p), depth = pixel.x, radius = 3.0, valid = p.z > camera.near\n"
        "                                               ^",
    ),
    (
        "ray_in_projection",
        sub("depth = p.z", "depth = ray.dir.z"),
        ScopeError,
        "blob.xpr:7:44: error: 'ray' is only available in the response\n"
        "      emit centre = camera.project(p), depth = ray.dir.z, radius = 3.0, valid = p.z > camera.near\n"
        "                                               ^",
    ),
    (
        "projection_local_in_response",
        sub("d = pixel - centre", "d = pixel - p.xy"),
        ScopeError,
        "blob.xpr:10:15: error: 'p' is local to the projection; emit it to use it in the response\n"
        "      d = pixel - p.xy\n"
        "                  ^",
    ),
    (
        "param_in_function",
        BASE + "fn f(x) = x + means\n",
        ScopeError,
        "blob.xpr:14:15: error: 'means' is not available in a function (pass it as an argument)\n"
        "    fn f(x) = x + means\n"
        "                  ^",
    ),
    # types and shapes
    (
        "add_vec3_vec2",
        sub("d = pixel - centre", "d = pixel - means"),
        XprTypeError,
        "blob.xpr:10:13: error: cannot subtract vec2 and vec3\n"
        "      d = pixel - means\n"
        "                ^",
    ),
    (
        "mul_mat_mismatch",
        sub("d = pixel - centre", "d = [[1, 2], [3, 4]] * means"),
        XprTypeError,
        "blob.xpr:10:24: error: cannot multiply mat2 and vec3\n"
        "      d = [[1, 2], [3, 4]] * means\n"
        "                           ^",
    ),
    (
        "compare_vec",
        sub("p.z > camera.near", "p > camera.near"),
        XprTypeError,
        "blob.xpr:7:73: error: cannot compare vec3 and scalar\n"
        "      emit centre = camera.project(p), depth = p.z, radius = 3.0, valid = p > camera.near\n"
        "                                                                            ^",
    ),
    (
        "and_scalar",
        sub("p.z > camera.near", "p.z and true"),
        XprTypeError,
        "blob.xpr:7:75: error: 'and' needs bool operands, got scalar and bool\n"
        "      emit centre = camera.project(p), depth = p.z, radius = 3.0, valid = p.z and true\n"
        "                                                                              ^",
    ),
    (
        "where_branches",
        sub("alpha = min", "alpha = where(d.x > 0, d, means).x + min"),
        XprTypeError,
        "blob.xpr:11:11: error: 'where' branches differ: vec2 and vec3\n"
        "      alpha = where(d.x > 0, d, means).x + min(0.99, opacities * exp(-dot(d, d)))\n"
        "              ^",
    ),
    (
        "centre_wrong_type",
        sub("centre = camera.project(p)", "centre = p"),
        XprTypeError,
        "blob.xpr:7:8: error: 'centre' must be vec2, got vec3\n"
        "      emit centre = p, depth = p.z, radius = 3.0, valid = p.z > camera.near\n"
        "           ^",
    ),
    (
        "alpha_wrong_type",
        sub("alpha = min(0.99, opacities * exp(-dot(d, d)))", "alpha = d"),
        XprTypeError,
        "blob.xpr:11:3: error: 'alpha' must be scalar, got vec2\n      alpha = d\n      ^",
    ),
    (
        "reassign_type",
        sub("d = pixel - centre", "d = pixel - centre\n  d = 1.0"),
        XprTypeError,
        "blob.xpr:11:7: error: cannot assign scalar to 'd' of type vec2\n"
        "      d = 1.0\n"
        "          ^",
    ),
    (
        "activation_type",
        sub("sigmoid(raw)", "[raw, raw]"),
        XprTypeError,
        "blob.xpr:3:28: error: activation of 'opacities' must give scalar, got vec2\n"
        "    param opacities : scalar = [raw, raw]\n"
        "                               ^",
    ),
    (
        "wrong_arity",
        sub("exp(-dot(d, d))", "exp(-dot(d))"),
        XprTypeError,
        "blob.xpr:11:38: error: 'dot' takes 2 arguments, got 1\n"
        "      alpha = min(0.99, opacities * exp(-dot(d)))\n"
        "                                         ^",
    ),
    (
        "user_fn_arity",
        BASE.replace("color = [1, 1, 1]", "fn f(a, b) = a + b\ncolor = f(1) * [1, 1, 1]"),
        XprTypeError,
        "blob.xpr:14:9: error: 'f' takes 2 arguments, got 1\n"
        "    color = f(1) * [1, 1, 1]\n"
        "            ^",
    ),
    (
        "cross_vec2",
        sub("exp(-dot(d, d))", "exp(-dot(cross(d, d), d))"),
        XprTypeError,
        "blob.xpr:11:48: error: 'cross' needs vec3, got vec2\n"
        "      alpha = min(0.99, opacities * exp(-dot(cross(d, d), d)))\n"
        "                                                   ^",
    ),
    (
        "transpose_vec",
        sub("d = pixel - centre", "d = (pixel - centre)^T"),
        XprTypeError,
        "blob.xpr:10:23: error: cannot transpose vec2\n"
        "      d = (pixel - centre)^T\n"
        "                          ^",
    ),
    (
        "camera_not_value",
        sub("depth = p.z", "depth = camera"),
        XprTypeError,
        "blob.xpr:7:44: error: 'camera' is not a value; use camera.<attribute>\n"
        "      emit centre = camera.project(p), depth = camera, radius = 3.0, valid = p.z > camera.near\n"
        "                                               ^",
    ),
    (
        "index_out_of_range",
        sub("depth = p.z", "depth = p[3]"),
        StaticError,
        "blob.xpr:7:46: error: index 3 out of range for vec3\n"
        "      emit centre = camera.project(p), depth = p[3], radius = 3.0, valid = p.z > camera.near\n"
        "                                                 ^",
    ),
    (
        "index_not_static",
        sub("depth = p.z", "depth = p[opacities]"),
        StaticError,
        "blob.xpr:7:46: error: index must be a compile-time integer\n"
        "      emit centre = camera.project(p), depth = p[opacities], radius = 3.0, valid = p.z > camera.near\n"
        "                                                 ^",
    ),
    (
        "loop_bounds",
        sub("  emit centre", "  for i in 0..opacities { }\n  emit centre"),
        StaticError,
        "blob.xpr:7:15: error: loop bounds must be compile-time integers\n"
        "      for i in 0..opacities { }\n"
        "                  ^",
    ),
    (
        "loop_too_long",
        sub("  emit centre", "  for i in 0..100000 { }\n  emit centre"),
        StaticError,
        "blob.xpr:7:15: error: loop of 100000 iterations is too long (at most 1024)\n"
        "      for i in 0..100000 { }\n"
        "                  ^",
    ),
    (
        "recursion",
        BASE.replace("color = [1, 1, 1]", "fn f(a) = f(a)\ncolor = f(1) * [1, 1, 1]"),
        StaticError,
        "blob.xpr:13:11: error: recursive call to 'f'\n    fn f(a) = f(a)\n              ^",
    ),
    (
        "div_zero_const",
        sub("const k = 2", "const k = 2 / 0"),
        StaticError,
        "blob.xpr:4:13: error: division by zero\n    const k = 2 / 0\n                ^",
    ),
    (
        "const_not_static",
        sub("const k = 2", "const k = camera.fx"),
        ScopeError,
        "blob.xpr:4:11: error: 'camera' is not available in a constant\n"
        "    const k = camera.fx\n"
        "              ^",
    ),
    (
        "sh_degree",
        sub("param means : vec3", "param means : sh(5)"),
        XprTypeError,
        "blob.xpr:2:15: error: sh degree must be 0..3, got 5\n"
        "    param means : sh(5)\n"
        "                  ^",
    ),
    (
        "eye_size",
        sub("depth = p.z", "depth = eye(p.z)[0, 0]"),
        StaticError,
        "blob.xpr:7:50: error: 'eye' needs a compile-time size in 1..64\n"
        "      emit centre = camera.project(p), depth = eye(p.z)[0, 0], radius = 3.0, valid = p.z > camera.near\n"
        "                                                     ^",
    ),
    # missing outputs
    (
        "no_primitive",
        BASE.replace("primitive Blob\n", ""),
        MissingOutputError,
        "blob.xpr:1:1: error: missing 'primitive NAME' declaration\n    param means : vec3\n    ^",
    ),
    (
        "no_projection",
        BASE[: BASE.index("projection")] + BASE[BASE.index("response") :],
        MissingOutputError,
        "blob.xpr:1:1: error: missing 'projection { ... }' block\n    primitive Blob\n    ^",
    ),
    (
        "no_response",
        BASE[: BASE.index("response")] + "color = [1, 1, 1]\n",
        MissingOutputError,
        "blob.xpr:1:1: error: missing 'response { ... }' block\n    primitive Blob\n    ^",
    ),
    (
        "no_centre",
        sub("centre = camera.project(p), ", ""),
        MissingOutputError,
        "blob.xpr:5:1: error: projection must emit 'centre' (vec2)\n    projection {\n    ^",
    ),
    (
        "no_valid",
        sub(", valid = p.z > camera.near", ""),
        MissingOutputError,
        "blob.xpr:5:1: error: projection must emit 'valid' (bool)\n    projection {\n    ^",
    ),
    (
        "no_footprint",
        sub("radius = 3.0, ", ""),
        MissingOutputError,
        "blob.xpr:5:1: error: projection must emit a footprint: 'radius' (scalar), 'radii' (vec2) or 'box' (vec4)\n"
        "    projection {\n"
        "    ^",
    ),
    (
        "two_footprints",
        sub("radius = 3.0, ", "radius = 3.0, radii = [1, 2], "),
        DuplicateError,
        "blob.xpr:7:63: error: projection emits more than one footprint ('radius' and 'radii')\n"
        "      emit centre = camera.project(p), depth = p.z, radius = 3.0, radii = [1, 2], valid = p.z > camera.near\n"
        "                                                                  ^",
    ),
    (
        "no_alpha",
        sub("alpha = min", "beta = min"),
        MissingOutputError,
        "blob.xpr:9:1: error: response must assign 'alpha'\n    response {\n    ^",
    ),
    (
        "no_color",
        BASE.replace("color = [1, 1, 1]\n", ""),
        MissingOutputError,
        "blob.xpr:1:1: error: missing 'color = ...' (or 'emit color = ...' in the projection)\n"
        "    primitive Blob\n"
        "    ^",
    ),
    (
        "assigned_not_emitted",
        sub("emit centre = camera.project(p), ", "centre = camera.project(p)\n  emit "),
        MissingOutputError,
        "blob.xpr:5:1: error: projection must emit 'centre' (vec2); it is assigned but not emitted: write 'emit centre = ...'\n"
        "    projection {\n"
        "    ^",
    ),
    # duplicates
    (
        "dup_param",
        sub("param opacities", "param means : vec3\nparam opacities"),
        DuplicateError,
        "blob.xpr:3:7: error: 'means' is already defined as a parameter (line 2)\n"
        "    param means : vec3\n"
        "          ^",
    ),
    (
        "dup_const",
        sub("const k = 2", "const k = 2\nconst k = 3"),
        DuplicateError,
        "blob.xpr:5:7: error: 'k' is already defined as a constant (line 4)\n"
        "    const k = 3\n"
        "          ^",
    ),
    (
        "dup_block",
        BASE + "response { alpha = 0 }\n",
        DuplicateError,
        "blob.xpr:14:1: error: duplicate 'response' block (first on line 9)\n"
        "    response { alpha = 0 }\n"
        "    ^",
    ),
    (
        "dup_emit",
        sub("depth = p.z,", "depth = p.z, depth = 1,"),
        DuplicateError,
        "blob.xpr:7:49: error: 'depth' is already defined (line 7)\n"
        "      emit centre = camera.project(p), depth = p.z, depth = 1, radius = 3.0, valid = p.z > camera.near\n"
        "                                                    ^",
    ),
    (
        "dup_color",
        sub("radius = 3.0,", "radius = 3.0, color = 1,"),
        DuplicateError,
        "blob.xpr:13:1: error: 'color' is both emitted by the projection (line 7) and declared here\n"
        "    color = [1, 1, 1]\n"
        "    ^",
    ),
    (
        "dup_fn_arg",
        BASE + "fn f(a, a) = a\n",
        DuplicateError,
        "blob.xpr:14:9: error: duplicate argument 'a'\n    fn f(a, a) = a\n            ^",
    ),
    (
        "assign_param",
        sub("d = pixel - centre", "opacities = 1"),
        DuplicateError,
        "blob.xpr:10:3: error: cannot assign to parameter 'opacities'\n"
        "      opacities = 1\n"
        "      ^",
    ),
    (
        "assign_const",
        sub("  p = camera", "  k = 3\n  p = camera"),
        DuplicateError,
        "blob.xpr:6:3: error: cannot assign to constant 'k'\n      k = 3\n      ^",
    ),
    (
        "const_param_clash",
        sub("const k = 2", "const means = 2"),
        DuplicateError,
        "blob.xpr:4:7: error: 'means' is already defined as a parameter (line 2)\n"
        "    const means = 2\n"
        "          ^",
    ),
    (
        "emit_in_response",
        sub("alpha = min", "emit q = 1\n  alpha = min"),
        ScopeError,
        "blob.xpr:11:8: error: 'emit' is only allowed in the projection\n"
        "      emit q = 1\n"
        "           ^",
    ),
    (
        "emit_in_loop",
        sub("  emit centre", "  for i in 0..2 { emit q = i }\n  emit centre"),
        ScopeError,
        "blob.xpr:7:24: error: 'emit' is not allowed inside a loop\n"
        "      for i in 0..2 { emit q = i }\n"
        "                           ^",
    ),
    # injection attempts
    (
        "dunder",
        sub("const k = 2", "const __import__ = 2"),
        ReservedNameError,
        "blob.xpr:4:7: error: constant '__import__': names starting with '_' or containing '__' are reserved\n"
        "    const __import__ = 2\n"
        "          ^",
    ),
    (
        "underscore",
        sub("const k = 2", "const _k = 2"),
        ReservedNameError,
        "blob.xpr:4:7: error: constant '_k': names starting with '_' or containing '__' are reserved\n"
        "    const _k = 2\n"
        "          ^",
    ),
    (
        "double_underscore",
        sub("const k = 2", "const a__b = 2"),
        ReservedNameError,
        "blob.xpr:4:7: error: constant 'a__b': names starting with '_' or containing '__' are reserved\n"
        "    const a__b = 2\n"
        "          ^",
    ),
    (
        "python_keyword",
        sub("const k = 2", "const lambda = 2"),
        ReservedNameError,
        "blob.xpr:4:7: error: 'lambda' is reserved and cannot be used as a name\n"
        "    const lambda = 2\n"
        "          ^",
    ),
    (
        "os",
        sub("d = pixel - centre", "os = 1\n  d = pixel - centre"),
        ReservedNameError,
        "blob.xpr:10:3: error: 'os' is reserved and cannot be used as a name\n"
        "      os = 1\n"
        "      ^",
    ),
    (
        "eval_call",
        sub("exp(-dot(d, d))", "eval(1)"),
        UnknownNameError,
        "blob.xpr:11:33: error: unknown function 'eval' (did you mean 'eval_sh'?)\n"
        "      alpha = min(0.99, opacities * eval(1))\n"
        "                                    ^",
    ),
    (
        "import_name",
        sub("param means : vec3", "param import : vec3"),
        ReservedNameError,
        "blob.xpr:2:7: error: 'import' is reserved and cannot be used as a name\n"
        "    param import : vec3\n"
        "          ^",
    ),
    (
        "builtin_shadow",
        sub("d = pixel - centre", "exp = 1\n  d = pixel - centre"),
        ReservedNameError,
        "blob.xpr:10:3: error: 'exp' is a built-in function\n      exp = 1\n      ^",
    ),
    (
        "reserved_lang",
        sub("d = pixel - centre", "T = 1\n  d = pixel - centre"),
        ReservedNameError,
        "blob.xpr:10:3: error: 'T' is a built-in name of the language\n      T = 1\n      ^",
    ),
    (
        "string_literal",
        sub("const k = 2", "const k = \"__import__('os')\""),
        ParseError,
        "blob.xpr:4:11: error: unexpected character '\"'\n"
        "    const k = \"__import__('os')\"\n"
        "              ^",
    ),
    # training annotations on parameters
    (
        "init_unknown_rule",
        sub("param means : vec3", "param means : vec3 init pionts"),
        UnknownNameError,
        "blob.xpr:2:25: error: unknown init rule 'pionts' (did you mean 'points'?)\n"
        "    param means : vec3 init pionts\n"
        "                            ^",
    ),
    (
        "init_unknown_rule_no_suggestion",
        sub("param means : vec3", "param means : vec3 init random"),
        UnknownNameError,
        "blob.xpr:2:25: error: unknown init rule 'random' (expected points, colors, identity, nn_distance, zeros, ones or a number)\n"
        "    param means : vec3 init random\n"
        "                            ^",
    ),
    (
        "init_not_a_number",
        sub("param means : vec3", "param means : vec3 init [0, 0, 1]"),
        StaticError,
        "blob.xpr:2:25: error: init of 'means' must be a rule name or a compile-time number, got vec3\n"
        "    param means : vec3 init [0, 0, 1]\n"
        "                            ^",
    ),
    (
        "init_points_needs_vec3",
        sub("sigmoid(raw)", "sigmoid(raw) init points"),
        XprTypeError,
        "blob.xpr:3:46: error: init 'points' needs a vec3 parameter, 'opacities' is scalar\n"
        "    param opacities : scalar = sigmoid(raw) init points\n"
        "                                                 ^",
    ),
    (
        "role_unknown",
        sub("param means : vec3", "param means : vec3 role postion"),
        UnknownNameError,
        "blob.xpr:2:25: error: unknown role 'postion' (did you mean 'position'?)\n"
        "    param means : vec3 role postion\n"
        "                            ^",
    ),
    (
        "role_not_a_name",
        sub("param means : vec3", "param means : vec3 role 1"),
        ParseError,
        "blob.xpr:2:25: error: unexpected '1' (expected a name)\n"
        "    param means : vec3 role 1\n"
        "                            ^",
    ),
    (
        "role_opacity_needs_scalar",
        sub("param means : vec3", "param means : vec3 role opacity"),
        XprTypeError,
        "blob.xpr:2:25: error: role 'opacity' needs a scalar parameter, 'means' is vec3\n"
        "    param means : vec3 role opacity\n"
        "                            ^",
    ),
    (
        "role_given_twice",
        sub(
            "param means : vec3",
            "param means : vec3 role position\nparam offset : vec3 role position",
        ),
        DuplicateError,
        "blob.xpr:3:26: error: role 'position' is already given to 'means' (line 2)\n"
        "    param offset : vec3 role position\n"
        "                             ^",
    ),
    (
        "clause_duplicate",
        sub("param means : vec3", "param means : vec3 lr 1e-3 init points lr 2e-3"),
        DuplicateError,
        "blob.xpr:2:40: error: duplicate 'lr' for parameter 'means'\n"
        "    param means : vec3 lr 1e-3 init points lr 2e-3\n"
        "                                           ^",
    ),
    (
        "lr_not_a_number",
        sub("param means : vec3", "param means : vec3 lr [1, 2, 3]"),
        StaticError,
        "blob.xpr:2:23: error: lr of 'means' must be a compile-time number, got vec3\n"
        "    param means : vec3 lr [1, 2, 3]\n"
        "                          ^",
    ),
    (
        "lr_unknown_name",
        sub("param means : vec3", "param means : vec3 lr fast"),
        UnknownNameError,
        "blob.xpr:2:23: error: unknown name 'fast'\n"
        "    param means : vec3 lr fast\n"
        "                          ^",
    ),
    (
        "lr_negative",
        sub("param means : vec3", "param means : vec3 lr -k"),
        StaticError,
        "blob.xpr:2:23: error: lr of 'means' must be a finite number >= 0, got -2.0\n"
        "    param means : vec3 lr -k\n"
        "                          ^",
    ),
    (
        "primitive_keyword",
        BASE.replace("primitive Blob", "primitive class"),
        ReservedNameError,
        "blob.xpr:1:11: error: 'class' is reserved and cannot be used as a name\n"
        "    primitive class\n"
        "              ^",
    ),
]


def test_table_is_large():
    assert len(CASES) >= 40


@pytest.mark.parametrize("name,text,cls,message", CASES, ids=[c[0] for c in CASES])
def test_error(name, text, cls, message):
    with pytest.raises(cls) as info:
        driver.compile_source(text, "blob.xpr")
    assert str(info.value) == message
    assert isinstance(info.value, XprError)


def test_base_spec_compiles():
    assert "def response(" in driver.compile_source(BASE, "blob.xpr")


DEFINE_CASES = [
    (
        {"kk": "1"},
        "<command line>: error: -D kk: unknown constant 'kk' (did you mean 'k'?); "
        "the spec's constants: k",
    ),
    ({"k": "two"}, "<command line>: error: -D k: value must be a number, got 'two'"),
    ({"k": "nan"}, "<command line>: error: -D k: value must be a finite number, got nan"),
    (["k"], "<command line>: error: -D expects NAME=VALUE, got 'k'"),
    ({"k": [1]}, "<command line>: error: -D k: value must be a number, got [1]"),
]


@pytest.mark.parametrize("defines,message", DEFINE_CASES)
def test_bad_define(defines, message):
    with pytest.raises(DefineError) as info:
        driver.compile_source(BASE, "blob.xpr", defines)
    assert str(info.value) == message


def test_good_define_changes_constant():
    src = driver.compile_source(BASE, "blob.xpr", ["k=3.5"])
    assert "CONSTANTS = {'k': 3.5}" in src
    assert "# defines: -D k=3.5" in src
