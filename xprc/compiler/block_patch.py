"""`extend projection { ... }` / `extend response { ... }`: a derived spec changes single
statements of its base's block instead of replacing the block (called by extends.py when it
merges a spec with its base; docs/language.md, "Changing single statements").

The rule, statement by statement of the `extend` block, in its order:

- `emit x = e` where the base block emits `x`, or `x = e` where it assigns the local `x`, is an
  **override**: it takes the place of the base's statement, so the base's later statements
  that read `x` read the new value, and the base's value is never computed. `emit x = e` for a
  base local also makes it emitted. A base local can be overridden only where the base assigns
  it once, at the top level of the block (not reassigned, not inside a loop, not by element);
  `x = e` for a name the base emits must be written `emit x = e`.
- Every other statement is **new** (a new local or emit, an element assignment, a loop). New
  statements written before an override are placed just before it (so the override can read
  them, and they can read what the base defines before that place); those after the last
  override are appended after the base's statements.

Each mistake is a ReuseError at the `extend` block's statement."""

from __future__ import annotations

import dataclasses

from xprc.compiler import ast


def _assigned(stmts: list, out: dict, top: bool) -> None:
    """Name -> [(statement, overridable)] for every assignment and emit in `stmts`, loops
    included; overridable: a whole assignment or emit at the block's top level."""
    for st in stmts:
        if isinstance(st, (ast.Assign, ast.Emit)):
            whole = top and not (isinstance(st, ast.Assign) and st.indices)
            out.setdefault(st.name, []).append((st, whole))
        elif isinstance(st, ast.For):
            _assigned(st.body, out, False)


def emitted(block: ast.Block) -> tuple[str, ...]:
    """What a block emits, in order."""
    return tuple(st.name for st in block.body if isinstance(st, ast.Emit))


def apply(base: ast.Block, patch: ast.Extend, error) -> ast.Block:
    """The base block with the `extend` block's statements merged in (the rule above);
    `error(message, loc)` makes the ReuseError."""
    defs: dict[str, list] = {}
    _assigned(base.body, defs, True)
    where = base.loc.file or "the base spec"
    before: dict[int, list] = {}  # id of a base statement -> new statements placed before it
    replace: dict[int, object] = {}  # id of a base statement -> its override
    done: dict[str, ast.Loc] = {}
    pending: list = []
    for st in patch.body:
        target = _target(st, defs, done, where, error)
        if target is None:
            pending.append(st)
            continue
        done[st.name] = st.loc
        replace[id(target)] = st
        before[id(target)] = pending
        pending = []
    body = []
    for st in base.body:
        body.extend(before.get(id(st), []))
        body.append(replace.get(id(st), st))
    body.extend(pending)
    _read_before_defined(body, {id(st) for st in patch.body}, where, error)
    return ast.Block(base.loc, base.kind, body, base.signed)


def _names(stmts: list) -> set[str]:
    found: dict = {}
    _assigned(stmts, found, True)
    return set(found)


def _reads(node) -> list[ast.Name]:
    """The names an AST reads, in source order (a comprehension's variable excluded)."""
    out: list[ast.Name] = []
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, ast.Name):
            out.append(x)
        elif isinstance(x, list):
            stack.extend(reversed(x))
        elif isinstance(x, ast.Comprehension):
            out.extend(n for n in _reads([x.start, x.stop, x.body]) if n.id != x.var)
        elif isinstance(x, ast.Attr):
            stack.append(x.target)
        elif dataclasses.is_dataclass(x) and not isinstance(x, (type, ast.Loc)):
            stack.extend(reversed([getattr(x, f.name) for f in dataclasses.fields(x)]))
    return out


def _read_before_defined(body: list, own: set, where: str, error) -> None:
    """An `extend` statement placed where a value it reads is defined only by a later base
    statement: a located error that says where the base defines it (not 'unknown name')."""
    for i, st in enumerate(body):
        if id(st) not in own:
            continue
        defined = _names(body[:i])
        later: dict[str, str] = {}
        for after in body[i + 1 :]:
            by = "this block" if id(after) in own else where
            for name in _names([after]):
                later.setdefault(name, f"{by} on line {after.loc.line}")
        node = [st.value, *st.indices] if isinstance(st, ast.Assign) else st
        for name in _reads(node):
            if name.id not in defined and name.id in later:
                raise error(
                    f"'{name.id}' is defined by {later[name.id]}, after the place of this "
                    "statement: an override takes the place of the base's statement, new "
                    "statements before an override go just before it, the others after the "
                    "base's statements",
                    name.loc,
                )


def _target(st, defs: dict, done: dict, where: str, error):
    """The base statement that `st` overrides, or None when `st` is new."""
    if not isinstance(st, (ast.Assign, ast.Emit)) or st.name not in defs:
        return None
    if isinstance(st, ast.Assign) and st.indices:
        return None  # an element of a base value: a new statement, after the base's
    if st.name in done:
        raise error(f"'{st.name}' is already overridden in this block (line {done[st.name].line})",
                    st.loc)  # fmt: skip
    found = defs[st.name]
    lines = ", ".join(str(s.loc.line) for s, _ in found)
    if len(found) > 1 or not found[0][1]:
        how = "assigns it more than once"
        if len(found) == 1:
            how = "assigns it inside a loop or by element"
        raise error(
            f"cannot override '{st.name}': {where} {how} (line{'s' if len(found) > 1 else ''} "
            f"{lines}); only a value the base block assigns or emits once, at its top level, "
            "can be overridden",
            st.loc,
        )
    base_st = found[0][0]
    if isinstance(base_st, ast.Emit) and isinstance(st, ast.Assign):
        raise error(
            f"{where} emits '{st.name}' (line {base_st.loc.line}): override it with "
            f"'emit {st.name} = ...'",
            st.loc,
        )
    return base_st
