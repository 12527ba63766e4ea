"""`primitive NAME extends "base.xpr"`: a spec built on another one (between parse and check).

The base spec is read, parsed and resolved (it may extend another), and the two are merged: the
base's declarations in its order, each replaced in place by the derived spec's declaration of
the same kind and name (a `param`, `const` or `fn`, the `density`), the derived `projection`,
`response` and `color` replacing the base's, and new declarations appended; `extend projection
{ ... }` and `extend response { ... }` override or add single statements of the base's block
instead (block_patch.py). The result is checked as one spec, so it compiles exactly like its
hand-expanded copy.

Every location in a base file carries that file's name (`Loc.file`), so an error inside it
points at the base file's line. The base is found as `xprc.load` finds a spec (`locate`): a
path relative to the spec that names it, ending in `.xpr`, when that file exists (or the path
has a folder in it), else a shipped spec's name (`"3dgs"` or `"3dgs.xpr"`). Only letters,
digits, `_`, `-`, `.` and `/` are allowed (not absolute); the file is only ever parsed, never
executed. A missing file, a cycle, or more than MAX_DEPTH levels are located errors at the
path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import re

from xprc.compiler import ast, block_patch, parse
from xprc.compiler.spec_file import read_spec
from xprc.errors import ReuseError, XprError
from xprc.resources import shipped_specs

MAX_DEPTH = 16
_PATH = re.compile(r"^[A-Za-z0-9_.\-/]+$")


def _err(spec: ast.Spec, message: str, loc: ast.Loc) -> ReuseError:
    return ReuseError(
        message,
        filename=loc.file or spec.filename,
        line=loc.line,
        column=loc.column,
        source_line=spec.source_line(loc.line, loc.file),
    )


def _primitive(spec: ast.Spec) -> ast.Primitive | None:
    prims = (i for i in spec.items if isinstance(i, ast.Primitive) and i.base is not None)
    return next(prims, None)  # (an empty base, `extends ""`, is named as such: not none)


def locate(rel: str, spec_dir) -> pathlib.Path | str:
    """The file `extends "rel"` names, or why it names none (a message). As for `xprc.load`
    and the command line: a path (relative to `spec_dir`, ending in .xpr) when that file
    exists or `rel` has a folder in it; else a shipped spec's name, with or without .xpr."""
    folder = "/" in rel  # a path (a name has no folder)
    bad_path = rel.startswith("/") or "//" in rel or (folder and not rel.endswith(".xpr"))
    if not _PATH.match(rel) or bad_path:
        return (
            f"base spec '{rel}' is not allowed (a shipped spec's name, or a relative path "
            "ending in .xpr, of letters, digits, '_', '-', '.' and '/')"
        )
    path = pathlib.Path(spec_dir) / rel
    if rel.endswith(".xpr") and (folder or path.exists()):
        return path
    shipped = shipped_specs()
    if not folder and rel.removesuffix(".xpr") in shipped:
        return shipped[rel.removesuffix(".xpr")]
    if rel.endswith(".xpr"):
        return path  # missing: reading it says so
    return (
        f"no shipped spec '{rel}' (shipped: {', '.join(shipped) or 'none'}); "
        "a base spec file's path ends in .xpr"
    )


def _base_path(spec: ast.Spec, prim: ast.Primitive, spec_dir: pathlib.Path) -> pathlib.Path:
    found = locate(prim.base, spec_dir)
    if isinstance(found, str):
        raise _err(spec, found, prim.base_loc)
    return found


def _display(filename: str, rel: str) -> str:
    """How a base file is named in messages: relative to the naming spec's own name."""
    return os.path.normpath(os.path.join(os.path.dirname(filename), rel))


def _refuse_link_out(spec: ast.Spec, prim: ast.Primitive, spec_dir: pathlib.Path, path) -> None:
    """A base path is what the spec's text says: a symbolic link on it may not lead out of the
    naming spec's folder (a spec folder from elsewhere could otherwise read, and echo in an
    error, any file of this machine under a harmless name)."""
    home = spec_dir.resolve()
    target = path.resolve()
    if pathlib.Path(os.path.normpath(home / prim.base)) == target or target.is_relative_to(home):
        return
    raise _err(
        spec,
        f"base spec '{prim.base}' is a symbolic link leading out of the spec's folder; copy "
        "the base spec there, or name its real path",
        prim.base_loc,
    )


def resolve(spec: ast.Spec, spec_dir, _chain: tuple = ()) -> ast.Spec:
    """The spec with its `extends` chain merged in (the spec itself when it extends nothing)."""
    prim = _primitive(spec)
    if prim is None:
        return spec
    spec_dir = pathlib.Path(spec_dir)
    path = _base_path(spec, prim, spec_dir)
    try:
        key = str(path.resolve())
    except (OSError, RuntimeError) as e:  # a symlink loop (RuntimeError before Python 3.13)
        reason = getattr(e, "strerror", None) or "symlink loop"
        raise _err(spec, f"cannot resolve the 'extends' path: {reason}", prim.base_loc) from None
    if path == spec_dir / prim.base:
        _refuse_link_out(spec, prim, spec_dir, path)
    chain = _chain or (str(pathlib.Path(spec_dir, pathlib.Path(spec.filename).name).resolve()),)
    if key in chain:
        names = [pathlib.Path(c).name for c in chain] + [path.name]
        raise _err(spec, "cyclic 'extends': " + " -> ".join(names), prim.base_loc)
    if len(chain) > MAX_DEPTH:
        raise _err(spec, f"'extends' nested more than {MAX_DEPTH} deep", prim.base_loc)
    try:
        text = read_spec(path)
    except XprError as e:
        problem = e.message.removeprefix("cannot read spec: ")
        message = f"cannot read base spec '{prim.base}': {problem}"
        raise _err(spec, message, prim.base_loc) from None
    if path == spec_dir / prim.base:
        name = _display(prim.loc.file or spec.filename, prim.base)
    else:  # a shipped spec by name: no machine's path reaches messages or the module
        name = path.name
    base = parse.parse(text, name)
    base = ast.Spec(_relocate(base.items, name), name, text, dict(base.sources))
    base.sources.setdefault(name, text)
    base = resolve(base, path.parent, (*chain, key))
    sources = {**base.sources, **spec.sources}
    items = _merge(base.items, spec.items, lambda message, loc: _err(spec, message, loc))
    return ast.Spec(items, spec.filename, spec.source, sources)


def _key(item):
    if isinstance(item, (ast.Param, ast.Const, ast.Fn)):
        return (type(item).__name__, item.name)
    if isinstance(item, ast.Block):
        return ("block", item.kind)
    return (type(item).__name__,)  # Primitive, Color


def _merge(base: list, derived: list, error) -> list:
    out = list(base)
    index = {_key(item): i for i, item in enumerate(out)}
    for item in derived:
        if isinstance(item, ast.Extend):
            continue
        k = _key(item)
        if k in index:
            i = index.pop(k)  # replaced once; a second one is the checker's duplicate
            old = out[i]
            if isinstance(item, ast.Block):  # what the base block emitted, for the errors
                item = dataclasses.replace(
                    item, replaces=(old.loc.file, old.loc.line, block_patch.emitted(old))
                )
            out[i] = item
        else:
            out.append(item)
    own = {id(item) for item in out} - {id(item) for item in base}
    _extend_blocks(out, derived, own, error)
    return out


def _extend_blocks(out: list, derived: list, own: set, error) -> None:
    """Apply the derived spec's `extend projection/response { ... }` blocks to the base's
    (`own`: ids of the derived spec's items in `out`)."""
    seen: dict[str, ast.Extend] = {}
    for patch in (item for item in derived if isinstance(item, ast.Extend)):
        what = f"'extend {patch.kind}'"
        if patch.kind in seen:
            first = seen[patch.kind].loc.line
            raise error(f"duplicate {what} block (first on line {first})", patch.loc)
        seen[patch.kind] = patch
        i = next((i for i, x in enumerate(out) if _key(x) == ("block", patch.kind)), None)
        if i is None:
            raise error(f"{what}: the base spec has no {patch.kind} block to extend", patch.loc)
        if id(out[i]) in own:  # the derived spec's own block
            raise error(
                f"{what}: this spec also replaces the whole {patch.kind} (line "
                f"{out[i].loc.line}); extend the base's, or write the whole block",
                patch.loc,
            )
        out[i] = block_patch.apply(out[i], patch, error)


def _relocate(obj, file: str):
    """A copy of an AST (dataclasses, lists, tuples) whose every Loc names `file`."""
    if isinstance(obj, ast.Loc):
        return obj if obj.file else dataclasses.replace(obj, file=file)
    if isinstance(obj, list):
        return [_relocate(x, file) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_relocate(x, file) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: _relocate(getattr(obj, f.name), file) for f in dataclasses.fields(obj)}
        return dataclasses.replace(obj, **changes)
    return obj


def chain(path, text: str) -> list[tuple[pathlib.Path, str]]:
    """(file, text) of each base spec that `text` (the spec at `path`) extends, nearest first,
    found without parsing (for the cache key and the `-o` check). Problems are left to the
    compile, which reports them: the list stops there."""
    out: list[tuple[pathlib.Path, str]] = []
    seen = set()
    path = pathlib.Path(path)
    for _ in range(MAX_DEPTH + 1):
        m = re.search(r'^\s*primitive\s+\w+\s+extends\s+"([^"\n\\]*)"', text, re.MULTILINE)
        found = locate(m.group(1), path.parent) if m is not None else None
        if not isinstance(found, pathlib.Path):
            break
        path = found
        if str(path.resolve()) in seen:
            break
        seen.add(str(path.resolve()))
        try:
            text = read_spec(path)
        except XprError:
            break
        out.append((path, text))
    return out


def fingerprint(path, text: str) -> str:
    """sha256 over the texts of the base specs `text` extends (for the module cache key); ""
    when it extends nothing."""
    bases = chain(path, text)
    h = hashlib.sha256()
    for _, base_text in bases:
        h.update(base_text.encode("utf-8"))
    return h.hexdigest() if bases else ""
