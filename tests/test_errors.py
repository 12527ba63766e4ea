# ruff: noqa: E501  (the table holds full error messages, source lines included)
"""A table of broken specs: each must raise its XprError subclass with exactly this message,
location, source line and caret (the whole text the user sees)."""

import pytest

from xprc import errors
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
from xprc.resources import shipped_specs

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
        "blob.xpr:13:11: error: recursive function 'f': it calls itself; functions are inlined "
        "at each call, so they cannot recurse\n    fn f(a) = f(a)\n              ^",
    ),
    (
        "div_zero_const",
        sub("const k = 2", "const k = 2 / 0"),
        StaticError,
        "blob.xpr:4:13: error: division by zero\n    const k = 2 / 0\n                ^",
    ),
    (
        "modulo_by_zero",
        sub("const k = 2", "const k = 2 % 0"),
        StaticError,
        "blob.xpr:4:13: error: modulo by zero\n    const k = 2 % 0\n                ^",
    ),
    (
        "modulo_of_vectors_of_two_sizes",
        sub("radius = 3.0", "radius = p % [1, 2]"),
        XprTypeError,
        "blob.xpr:7:60: error: cannot take the modulo of vec3 and vec2\n"
        "      emit centre = camera.project(p), depth = p.z, radius = p % [1, 2], valid = p.z > camera.near\n"
        "                                                               ^",
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
        "emit_alpha_in_response",  # issue 13: `emit` in the response is a per-pixel output
        sub("alpha = min", "emit alpha = 1\n  alpha = min"),
        DuplicateError,
        "blob.xpr:11:8: error: 'alpha' is the response's own output: assign it\n"
        "      emit alpha = 1\n"
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
        "blob.xpr:2:25: error: unknown init rule 'random' (expected points, colors, identity, nn_distance, zeros, ones, normal(mean, std), uniform(low, high), unit() or a number)\n"
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
    # Python's int() reads these as 10 and 3; a spec's numbers are ASCII decimals only
    ({"k": "1_0"}, "<command line>: error: -D k: value must be a decimal number such as 2, "
                   "0.5 or 1e-3, got '1_0'"),
    ({"k": "\u0663"}, "<command line>: error: -D k: value must be a decimal number such as 2, "
                       "0.5 or 1e-3, got '\\u0663'"),
    # the last one won, without a word
    (["k=1", "k = 2"], "<command line>: error: -D k is given twice (1, 2): give it once"),
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


# ---------------------------------------------------------------------------------------------
# Issue 13 (language v2): cutoff, stop_gradient, multi-argument density, camera.model, numeric
# init through any activation, extends. Each row: (id, files, class name); files is the spec
# text (blob.xpr) or {path: text} with blob.xpr the spec compiled (None: a directory). The
# full message of each is in V2_MESSAGES.

V2_DENS = BASE.replace("const k = 2", "const k = 2\ndensity(g) = exp(-0.5 * g)")
V2_DENS2 = BASE.replace("const k = 2", "const k = 2\ndensity(g, nu) = (1 + g / nu)^-2")


def _d(old, new, base=V2_DENS):
    assert old in base, old
    return base.replace(old, new, 1)


V2_BASEFILE = BASE.replace("primitive Blob", "primitive Base")
V2_CASES = [
    ("cutoff_no_density", sub("radius = 3.0", "radius = cutoff(0.1)"), "MissingOutputError"),
    ("cutoff_arity", _d("radius = 3.0", "radius = cutoff(0.1, 2)"), "XprTypeError"),
    ("cutoff_no_args", _d("radius = 3.0", "radius = cutoff()"), "XprTypeError"),
    ("cutoff_vector_level", _d("radius = 3.0", "radius = cutoff(p)"), "XprTypeError"),
    (
        "cutoff_vector_density",
        _d("density(g) = exp(-0.5 * g)", "density(g) = [g, g]").replace(
            "radius = 3.0", "radius = cutoff(0.5)"
        ),
        "XprTypeError",
    ),
    ("cutoff_as_value", _d("radius = 3.0", "radius = cutoff"), "XprTypeError"),
    ("cutoff_reserved", sub("const k = 2", "const cutoff = 2"), "ReservedNameError"),
    ("cutoff_bool_level", _d("radius = 3.0", "radius = cutoff(p.z > 0)"), "XprTypeError"),
    ("stop_gradient_bool", sub("radius = 3.0", "radius = stop_gradient(true)"), "XprTypeError"),
    ("stop_gradient_arity", sub("radius = 3.0", "radius = stop_gradient(1, 2)"), "XprTypeError"),
    (
        "density_too_many_args",
        _d("exp(-dot(d, d))", "density(dot(d, d), 2, 3)", V2_DENS2),
        "XprTypeError",
    ),
    (
        "density_implicit_missing",
        _d("exp(-dot(d, d))", "density(dot(d, d))", V2_DENS2),
        "XprTypeError",
    ),
    (
        "cutoff_implicit_missing",
        _d("radius = 3.0", "radius = cutoff(0.1)", V2_DENS2),
        "XprTypeError",
    ),
    (
        "density_duplicate_arg",
        _d("density(g) = exp(-0.5 * g)", "density(g, g) = exp(-0.5 * g)"),
        "DuplicateError",
    ),
    (
        "density_reserved_arg",
        _d("density(g) = exp(-0.5 * g)", "density(g, pixel) = exp(-0.5 * g)"),
        "ReservedNameError",
    ),
    (
        "density_trailing_comma",
        _d("density(g) = exp(-0.5 * g)", "density(g, ) = exp(-0.5 * g)"),
        "ParseError",
    ),
    ("density_no_args", _d("density(g) = exp(-0.5 * g)", "density() = 1"), "ParseError"),
    (
        "density_twice",
        _d("density(g) = exp(-0.5 * g)", "density(g) = exp(-0.5 * g)\ndensity(g, nu) = g"),
        "DuplicateError",
    ),
    (
        "density_unknown_name",
        _d("density(g) = exp(-0.5 * g)", "density(g, nu) = exp(-g / mu)"),
        "UnknownNameError",
    ),
    (
        "density_vector_arg_cutoff",
        _d("radius = 3.0", "radius = cutoff(0.1, p)", V2_DENS2),
        "XprTypeError",
    ),
    (
        "camera_model_value",
        sub("radius = 3.0", "radius = where(camera.model, 1, 2)"),
        "XprTypeError",
    ),
    (
        "camera_model_order",
        sub("radius = 3.0", "radius = where(camera.model < pinhole, 1, 2)"),
        "XprTypeError",
    ),
    (
        "camera_model_unknown",
        sub("radius = 3.0", "radius = where(camera.model == pinholes, 1, 2)"),
        "UnknownNameError",
    ),
    (
        "camera_model_number",
        sub("radius = 3.0", "radius = where(camera.model == 3, 1, 2)"),
        "XprTypeError",
    ),
    (
        "camera_model_in_function",
        sub("const k = 2", "const k = 2\nfn f(x) = where(camera.model == ortho, x, 0)").replace(
            "radius = 3.0", "radius = f(3)"
        ),
        "ScopeError",
    ),
    (
        "camera_model_in_constant",
        sub("const k = 2", "const k = where(camera.model == ortho, 1, 2)"),
        "ScopeError",
    ),
    (
        "camera_model_typo",
        sub("radius = 3.0", "radius = where(camera.modle == ortho, 1, 2)"),
        "UnknownNameError",
    ),
    (
        "camera_model_in_response",
        sub("alpha = min(", "alpha = where(camera.model != fisheye and camera.model, 0, 1) + min("),
        "XprTypeError",
    ),
    (
        "init_unreachable",
        sub("param means : vec3", "param means : vec3\nparam b : scalar = exp(raw) + 1 init 0"),
        "StaticError",
    ),
    (
        "init_vector_only_activation",
        sub("param means : vec3", "param means : vec3\nparam b : vec3 = raw / norm(raw) init 0.5"),
        "StaticError",
    ),
    (
        "init_negative_square",
        sub("param means : vec3", "param means : vec3\nparam b : scalar = raw^2 + 1 init -1"),
        "StaticError",
    ),
    ("extends_missing", {"blob.xpr": 'primitive S extends "nothere.xpr"\n'}, "ReuseError"),
    ("extends_missing_dir", {"blob.xpr": 'primitive S extends "lib/base.xpr"\n'}, "ReuseError"),
    (
        "extends_directory",
        {"blob.xpr": 'primitive S extends "base.xpr"\n', "base.xpr": None},
        "ReuseError",
    ),
    (
        "extends_cycle",
        {
            "blob.xpr": 'primitive S extends "a.xpr"\n',
            "a.xpr": 'primitive A extends "b.xpr"\n',
            "b.xpr": 'primitive B extends "a.xpr"\n',
        },
        "ReuseError",
    ),
    ("extends_self", {"blob.xpr": 'primitive S extends "blob.xpr"\n'}, "ReuseError"),
    ("extends_absolute", {"blob.xpr": 'primitive S extends "/etc/passwd"\n'}, "ReuseError"),
    (
        "extends_not_xpr",
        {"blob.xpr": 'primitive S extends "base.txt"\n', "base.txt": V2_BASEFILE},
        "ReuseError",
    ),
    ("extends_space", {"blob.xpr": 'primitive S extends "my base.xpr"\n'}, "ReuseError"),
    ("extends_backslash", {"blob.xpr": 'primitive S extends "a\\\\b.xpr"\n'}, "ParseError"),
    (
        "extends_unterminated",
        {"blob.xpr": 'primitive S extends "base.xpr\nparam x : vec3\n'},
        "ParseError",
    ),
    ("extends_name", {"blob.xpr": "primitive S extends base\n"}, "ParseError"),
    ("string_elsewhere", sub("const k = 2", 'const k = "2"'), "ParseError"),
    (
        "base_unknown_name",
        {
            "blob.xpr": 'primitive S extends "base.xpr"\n',
            "base.xpr": V2_BASEFILE.replace("opacities * exp", "opactiy * exp"),
        },
        "UnknownNameError",
    ),
    (
        "base_parse_error",
        {
            "blob.xpr": 'primitive S extends "base.xpr"\n',
            "base.xpr": V2_BASEFILE.replace("const k = 2", "const k = 2 $"),
        },
        "ParseError",
    ),
    (
        "base_of_base_error",
        {
            "blob.xpr": 'primitive S extends "lib/mid.xpr"\n',
            "lib/mid.xpr": 'primitive M extends "../base.xpr"\nconst k = 3\n',
            "base.xpr": V2_BASEFILE.replace("p.z > camera.near", "p.z > camera.nearr"),
        },
        "UnknownNameError",
    ),
    (
        "derived_duplicate_param",
        {
            "blob.xpr": 'primitive S extends "base.xpr"\nparam b : scalar\nparam b : vec3\n',
            "base.xpr": V2_BASEFILE,
        },
        "DuplicateError",
    ),
    (
        "derived_const_over_param",
        {"blob.xpr": 'primitive S extends "base.xpr"\nconst means = 1\n', "base.xpr": V2_BASEFILE},
        "DuplicateError",
    ),
    (
        "derived_breaks_base",
        {
            "blob.xpr": 'primitive S extends "base.xpr"\nparam means : vec2\n',
            "base.xpr": V2_BASEFILE,
        },
        "XprTypeError",
    ),
    (
        "derived_error_in_override",
        {
            "blob.xpr": 'primitive S extends "base.xpr"\nresponse { alpha = min(0.99, opacitys) }\n',
            "base.xpr": V2_BASEFILE,
        },
        "UnknownNameError",
    ),
]

V2_MESSAGES = {
    "cutoff_no_density": (
        "blob.xpr:7:58: error: 'cutoff' needs a kernel: declare 'density(g) = ...'\n"
        "      emit centre = camera.project(p), depth = p.z, radius = cutoff(0.1), valid = p.z > camera.near\n"
        "                                                             ^"
    ),
    "cutoff_arity": (
        "blob.xpr:8:58: error: 'cutoff' takes 1 argument (the level), got 2\n"
        "      emit centre = camera.project(p), depth = p.z, radius = cutoff(0.1, 2), valid = p.z > camera.near\n"
        "                                                             ^"
    ),
    "cutoff_no_args": (
        "blob.xpr:8:58: error: 'cutoff' takes 1 argument (the level), got 0\n"
        "      emit centre = camera.project(p), depth = p.z, radius = cutoff(), valid = p.z > camera.near\n"
        "                                                             ^"
    ),
    "cutoff_vector_level": (
        "blob.xpr:8:65: error: 'cutoff' needs scalars, got vec3\n"
        "      emit centre = camera.project(p), depth = p.z, radius = cutoff(p), valid = p.z > camera.near\n"
        "                                                                    ^"
    ),
    "cutoff_vector_density": (
        "blob.xpr:5:1: error: 'cutoff' needs a density that returns a scalar\n"
        "    density(g) = [g, g]\n"
        "    ^"
    ),
    "cutoff_as_value": (
        "blob.xpr:8:58: error: function 'cutoff' used as a value (call it)\n"
        "      emit centre = camera.project(p), depth = p.z, radius = cutoff, valid = p.z > camera.near\n"
        "                                                             ^"
    ),
    "cutoff_reserved": (
        "blob.xpr:4:7: error: 'cutoff' is a built-in function\n    const cutoff = 2\n          ^"
    ),
    "cutoff_bool_level": (
        "blob.xpr:8:69: error: 'cutoff' needs scalars, got bool\n"
        "      emit centre = camera.project(p), depth = p.z, radius = cutoff(p.z > 0), valid = p.z > camera.near\n"
        "                                                                        ^"
    ),
    "stop_gradient_bool": (
        "blob.xpr:7:72: error: 'stop_gradient' needs a number, vector or matrix, got bool\n"
        "      emit centre = camera.project(p), depth = p.z, radius = stop_gradient(true), valid = p.z > camera.near\n"
        "                                                                           ^"
    ),
    "stop_gradient_arity": (
        "blob.xpr:7:58: error: 'stop_gradient' takes 1 argument, got 2\n"
        "      emit centre = camera.project(p), depth = p.z, radius = stop_gradient(1, 2), valid = p.z > camera.near\n"
        "                                                             ^"
    ),
    "density_too_many_args": (
        "blob.xpr:12:33: error: 'density' takes 2 arguments, got 3\n"
        "      alpha = min(0.99, opacities * density(dot(d, d), 2, 3))\n"
        "                                    ^"
    ),
    "density_implicit_missing": (
        "blob.xpr:12:33: error: 'density' takes 2 arguments, got 1 (nothing named 'nu' here to pass as the density's 'nu')\n"
        "      alpha = min(0.99, opacities * density(dot(d, d)))\n"
        "                                    ^"
    ),
    "cutoff_implicit_missing": (
        "blob.xpr:8:58: error: 'cutoff' takes 2 arguments, got 1 (nothing named 'nu' here to pass as the density's 'nu')\n"
        "      emit centre = camera.project(p), depth = p.z, radius = cutoff(0.1), valid = p.z > camera.near\n"
        "                                                             ^"
    ),
    "density_duplicate_arg": (
        "blob.xpr:5:12: error: duplicate argument 'g'\n"
        "    density(g, g) = exp(-0.5 * g)\n"
        "               ^"
    ),
    "density_reserved_arg": (
        "blob.xpr:5:12: error: 'pixel' is a built-in name of the language\n"
        "    density(g, pixel) = exp(-0.5 * g)\n"
        "               ^"
    ),
    "density_trailing_comma": (
        "blob.xpr:5:12: error: unexpected ')' (expected a name)\n"
        "    density(g, ) = exp(-0.5 * g)\n"
        "               ^"
    ),
    "density_no_args": (
        "blob.xpr:5:9: error: unexpected ')' (expected a name)\n    density() = 1\n            ^"
    ),
    "density_twice": (
        "blob.xpr:6:1: error: 'density' is already defined as a function (line 5)\n"
        "    density(g, nu) = g\n"
        "    ^"
    ),
    "density_unknown_name": (
        "blob.xpr:5:27: error: unknown name 'mu'\n"
        "    density(g, nu) = exp(-g / mu)\n"
        "                              ^"
    ),
    "density_vector_arg_cutoff": (
        "blob.xpr:8:70: error: 'cutoff' needs scalars, got vec3\n"
        "      emit centre = camera.project(p), depth = p.z, radius = cutoff(0.1, p), valid = p.z > camera.near\n"
        "                                                                         ^"
    ),
    "camera_model_value": (
        "blob.xpr:7:71: error: camera.model can only be compared with a model name, e.g. 'camera.model == pinhole' (models: pinhole, opencv, fisheye, ortho)\n"
        "      emit centre = camera.project(p), depth = p.z, radius = where(camera.model, 1, 2), valid = p.z > camera.near\n"
        "                                                                          ^"
    ),
    "camera_model_order": (
        "blob.xpr:7:77: error: camera.model can only be compared with == or !=, not '<'\n"
        "      emit centre = camera.project(p), depth = p.z, radius = where(camera.model < pinhole, 1, 2), valid = p.z > camera.near\n"
        "                                                                                ^"
    ),
    "camera_model_unknown": (
        "blob.xpr:7:80: error: unknown camera model 'pinholes' (did you mean 'pinhole'?) (models: pinhole, opencv, fisheye, ortho)\n"
        "      emit centre = camera.project(p), depth = p.z, radius = where(camera.model == pinholes, 1, 2), valid = p.z > camera.near\n"
        "                                                                                   ^"
    ),
    "camera_model_number": (
        "blob.xpr:7:80: error: camera.model can only be compared with a model name (pinhole, opencv, fisheye, ortho)\n"
        "      emit centre = camera.project(p), depth = p.z, radius = where(camera.model == 3, 1, 2), valid = p.z > camera.near\n"
        "                                                                                   ^"
    ),
    "camera_model_in_function": (
        "blob.xpr:5:17: error: 'camera' is not available in a function\n"
        "    fn f(x) = where(camera.model == ortho, x, 0)\n"
        "                    ^"
    ),
    "camera_model_in_constant": (
        "blob.xpr:4:17: error: 'camera' is not available in a constant\n"
        "    const k = where(camera.model == ortho, 1, 2)\n"
        "                    ^"
    ),
    "camera_model_typo": (
        "blob.xpr:7:71: error: unknown camera attribute 'modle' (did you mean 'model'?)\n"
        "      emit centre = camera.project(p), depth = p.z, radius = where(camera.modle == ortho, 1, 2), valid = p.z > camera.near\n"
        "                                                                          ^"
    ),
    "camera_model_in_response": (
        "blob.xpr:11:41: error: camera.model can only be compared with == or !=, not 'and'\n"
        "      alpha = where(camera.model != fisheye and camera.model, 0, 1) + min(0.99, opacities * exp(-dot(d, d)))\n"
        "                                            ^"
    ),
    "init_unreachable": (
        "blob.xpr:3:38: error: init 0.0 of 'b': no raw value gives it through the activation 'exp(raw) + 1'\n"
        "    param b : scalar = exp(raw) + 1 init 0\n"
        "                                         ^"
    ),
    "init_vector_only_activation": (
        "blob.xpr:3:39: error: init 0.5 of 'b': no raw value gives it through the activation 'raw / norm(raw)'\n"
        "    param b : vec3 = raw / norm(raw) init 0.5\n"
        "                                          ^"
    ),
    "init_negative_square": (
        "blob.xpr:3:35: error: init -1.0 of 'b': no raw value gives it through the activation 'raw ^ 2 + 1'\n"
        "    param b : scalar = raw^2 + 1 init -1\n"
        "                                      ^"
    ),
    "extends_missing": (
        "blob.xpr:1:21: error: cannot read base spec 'nothere.xpr': No such file or directory\n"
        '    primitive S extends "nothere.xpr"\n'
        "                        ^"
    ),
    "extends_missing_dir": (
        "blob.xpr:1:21: error: cannot read base spec 'lib/base.xpr': No such file or directory\n"
        '    primitive S extends "lib/base.xpr"\n'
        "                        ^"
    ),
    "extends_directory": (
        "blob.xpr:1:21: error: cannot read base spec 'base.xpr': is a directory\n"
        '    primitive S extends "base.xpr"\n'
        "                        ^"
    ),
    "extends_cycle": (
        "b.xpr:1:21: error: cyclic 'extends': blob.xpr -> a.xpr -> b.xpr -> a.xpr\n"
        '    primitive B extends "a.xpr"\n'
        "                        ^"
    ),
    "extends_self": (
        "blob.xpr:1:21: error: cyclic 'extends': blob.xpr -> blob.xpr\n"
        '    primitive S extends "blob.xpr"\n'
        "                        ^"
    ),
    "extends_absolute": (
        "blob.xpr:1:21: error: base spec '/etc/passwd' is not allowed (a shipped spec's name, or a relative path ending in .xpr, of letters, digits, '_', '-', '.' and '/')\n"
        '    primitive S extends "/etc/passwd"\n'
        "                        ^"
    ),
    "extends_not_xpr": (
        f"blob.xpr:1:21: error: no shipped spec 'base.txt' (shipped: {', '.join(shipped_specs())}); a base spec file's path ends in .xpr\n"
        '    primitive S extends "base.txt"\n'
        "                        ^"
    ),
    "extends_space": (
        "blob.xpr:1:21: error: base spec 'my base.xpr' is not allowed (a shipped spec's name, or a relative path ending in .xpr, of letters, digits, '_', '-', '.' and '/')\n"
        '    primitive S extends "my base.xpr"\n'
        "                        ^"
    ),
    "extends_backslash": (
        "blob.xpr:1:21: error: unexpected character '\"'\n"
        '    primitive S extends "a\\\\b.xpr"\n'
        "                        ^"
    ),
    "extends_unterminated": (
        "blob.xpr:1:21: error: unexpected character '\"'\n"
        '    primitive S extends "base.xpr\n'
        "                        ^"
    ),
    "extends_name": (
        "blob.xpr:1:21: error: unexpected 'base': the base spec is a quoted path, "
        'extends "base.xpr"\n'
        "    primitive S extends base\n"
        "                        ^"
    ),
    "string_elsewhere": (
        'blob.xpr:4:11: error: unexpected character \'"\'\n    const k = "2"\n              ^'
    ),
    "base_unknown_name": (
        "base.xpr:11:21: error: unknown name 'opactiy' (did you mean 'opacities'?)\n"
        "      alpha = min(0.99, opactiy * exp(-dot(d, d)))\n"
        "                        ^"
    ),
    "base_parse_error": (
        "base.xpr:4:13: error: unexpected character '$'\n    const k = 2 $\n                ^"
    ),
    "base_of_base_error": (
        "base.xpr:7:84: error: unknown camera attribute 'nearr' (did you mean 'near'?)\n"
        "      emit centre = camera.project(p), depth = p.z, radius = 3.0, valid = p.z > camera.nearr\n"
        "                                                                                       ^"
    ),
    "derived_duplicate_param": (
        "blob.xpr:3:7: error: 'b' is already defined as a parameter (line 2)\n"
        "    param b : vec3\n"
        "          ^"
    ),
    "derived_const_over_param": (
        "blob.xpr:2:7: error: 'means' is already defined as a parameter (base.xpr line 2)\n"
        "    const means = 1\n"
        "          ^"
    ),
    "derived_breaks_base": (
        "base.xpr:6:30: error: camera.world_to_camera needs a vec3, got vec2\n"
        "      p = camera.world_to_camera(means)\n"
        "                                 ^"
    ),
    "derived_error_in_override": (
        "blob.xpr:2:30: error: unknown name 'opacitys' (did you mean 'opacities'?)\n"
        "    response { alpha = min(0.99, opacitys) }\n"
        "                                 ^"
    ),
}


# signed opacity and per-pixel outputs (`response signed`, `emit` in the response)
V2_CASES += [
    ("pixel_depth_vector", sub("alpha = min", "emit depth = d\n  alpha = min"), "XprTypeError"),
    (
        "pixel_output_matrix",
        sub("alpha = min", "emit m = outer(d, d)\n  alpha = min"),
        "XprTypeError",
    ),
    (
        "pixel_output_twice",
        sub("alpha = min", "emit t = 1, t = 2\n  alpha = min"),
        "DuplicateError",
    ),
    (
        "pixel_output_in_loop",
        sub("alpha = min", "for i in 0..2 { emit t = i }\n  alpha = min"),
        "ScopeError",
    ),
    ("signed_projection", sub("projection {", "projection signed {"), "ParseError"),
    ("signed_twice", sub("response {", "response signed signed {"), "ParseError"),
]
V2_MESSAGES.update(
    {
        "pixel_depth_vector": (
            "blob.xpr:11:16: error: per-pixel output 'depth' must be scalar, got vec2\n"
            "      emit depth = d\n"
            "                   ^"
        ),
        "pixel_output_matrix": (
            "blob.xpr:11:12: error: per-pixel output 'm' must be scalar or a vector, got mat2\n"
            "      emit m = outer(d, d)\n"
            "               ^"
        ),
        "pixel_output_twice": (
            "blob.xpr:11:15: error: 't' is already emitted (line 11)\n"
            "      emit t = 1, t = 2\n"
            "                  ^"
        ),
        "pixel_output_in_loop": (
            "blob.xpr:11:24: error: 'emit' is not allowed inside a loop\n"
            "      for i in 0..2 { emit t = i }\n"
            "                           ^"
        ),
        "signed_projection": (
            "blob.xpr:5:12: error: unexpected 'signed' (expected '{')\n"
            "    projection signed {\n"
            "               ^"
        ),
        "signed_twice": (
            "blob.xpr:9:17: error: unexpected 'signed' (expected '{')\n"
            "    response signed signed {\n"
            "                    ^"
        ),
    }
)


def test_language_v2_table_is_large():
    assert len(V2_CASES) >= 40 and set(V2_MESSAGES) == {c[0] for c in V2_CASES}


@pytest.mark.parametrize("name,files,cls", V2_CASES, ids=[c[0] for c in V2_CASES])
def test_language_v2_error(name, files, cls, tmp_path):
    files = {"blob.xpr": files} if isinstance(files, str) else files
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            (tmp_path / path).mkdir()
        else:
            (tmp_path / path).write_text(text)
    with pytest.raises(XprError) as info:
        driver.compile_source(files["blob.xpr"], "blob.xpr", spec_dir=tmp_path)
    assert type(info.value).__name__ == cls
    assert str(info.value) == V2_MESSAGES[name]


def test_unprintable_characters_are_escaped_and_the_caret_follows():
    """A file name, a quoted name or a spec line holding a newline, carriage return or terminal
    escape cannot split the message or fake a line: they are written as Python escapes, and the
    caret stays under the character it points at."""
    e = XprError("no spec file 'a\nb'", filename="a\nb\r.xpr")
    assert str(e) == "a\\nb\\r.xpr: error: no spec file 'a\\nb'"
    src = "primitive G\x1b[31m x"
    with pytest.raises(ParseError) as info:
        driver.compile_source(src + "\n", "s\x1b.xpr")
    lines = str(info.value).splitlines()
    assert lines[0] == "s\\x1b.xpr:1:12: error: unexpected character '\\x1b'"
    assert lines[1] == "    primitive G\\x1b[31m x"
    assert lines[2].index("^") == lines[1].index("\\x1b")


def test_a_long_line_is_cut_to_a_window_around_the_caret():
    """A spec error on a line of 784 KB printed the whole line and a caret line as long (1.58 MB
    on stderr): now at most 60 columns each side of the caret, `...` where the line goes on,
    and the caret under the same character."""
    src = "primitive G\nconst k =" + " " * 392_000 + "1 $ " + "a" * 392_000 + "\n"
    with pytest.raises(ParseError) as info:
        driver.compile_source(src, "s.xpr")
    col = 10 + 392_000 + 2
    assert str(info.value) == (
        f"s.xpr:2:{col}: error: unexpected character '$'\n"
        f"    ...{' ' * 58}1 $ {'a' * 58}...\n"
        f"    {' ' * 63}^"
    )


def test_the_window_counts_tabs_escapes_and_wide_characters_as_the_terminal_shows_them():
    """Before the caret: a tab (written as one space), an escape (written as 4 characters) and
    wide East Asian characters (2 terminal columns each): the caret stays under its character,
    and the window's 60 columns are terminal columns."""
    e = XprError("x", filename="f", line=1, column=5, source_line="\t\x1b日本$z")
    assert str(e) == "f:1:5: error: x\n     \\x1b日本$z\n    " + " " * 9 + "^"
    line = "日" * 100 + "$" + "日" * 100
    shown, pad = errors.caret_window(line, 101)
    assert shown == "..." + "日" * 30 + "$" + "日" * 29 + "..."
    assert pad == 3 + 60
    # a flood of zero-width combining marks is cut too (at 4 characters a column)
    shown, pad = errors.caret_window("\u0301" * 100_000 + "$", 100_001)
    assert shown == "..." + "\u0301" * 240 + "$" and pad == 3


def test_a_huge_message_is_cut_in_the_middle_and_says_how_much():
    """An unknown name of 784 KB was quoted whole in the message."""
    src = "primitive G\nconst k = " + "a" * 784_000 + "\n"
    with pytest.raises(UnknownNameError) as info:
        driver.compile_source(src, "s.xpr")
    first = str(info.value).splitlines()[0]
    assert len(first) < 4100
    assert first.startswith("s.xpr:2:11: error: unknown name 'aaaa")
    assert "[... 780,015 characters left out ...]" in first


@pytest.mark.parametrize(
    "text, limit, want",
    [("abc", 3, "abc"), ("abcd", 3, "..."), ("x" * 60, 60, "x" * 60),
     ("x" * 61, 60, "x" * 57 + "..."), ("1" * 4300, 40, "1" * 37 + "...")],
)  # fmt: skip
def test_a_value_in_a_message_is_cut_one_way(text, limit, want):
    """errors.cut_to: the one cut for values quoted in messages (cli arguments, JSON values,
    checkpoint metadata, method constants, verify's arguments)."""
    assert errors.cut_to(text, limit) == want and len(errors.cut_to(text, limit)) <= limit
