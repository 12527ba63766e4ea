"""README.md and docs/ stay true.

- Every ```python block of README.md runs as written, in order as one script, in an empty folder
  (no extra data). A comment line right after a `print(...)` line shows what it prints; the test
  compares.
- Every `xprc.NAME` named in README.md, docs/*.md and the package's own strings (messages,
  docstrings) exists.
- Every relative link and image of README.md and docs/*.md points at a file, and a `#heading`
  fragment at a heading of that file.
- README.md holds exactly one test command in a ```bash block, and it is what CI runs.
"""

from __future__ import annotations

import ast
import importlib
import re

import numpy as np
import pytest
from conftest import ROOT
from PIL import Image

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]  # docs/dev/ too
TEST_COMMAND = "python -m pytest"
HEAVY_JOB = "python -m pytest -m heavy"  # CI's second job (tests/heavy_tests.txt)

_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
_NAME = re.compile(r"(?<![\w./-])xprc(?:\.[A-Za-z_]\w*)+")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)|<img [^>]*src=\"([^\"]+)\"")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def fenced(text: str) -> list[tuple[str, str, int]]:
    """(language, body, line of the body's first line) of each fenced block."""
    return [
        (m.group(1), m.group(2), text.count("\n", 0, m.start(2)) + 1) for m in _FENCE.finditer(text)
    ]


def prose(text: str) -> str:
    """`text` without its fenced blocks (headings and links there are code, not markdown)."""
    return _FENCE.sub("", text)


# --------------------------------------------------------------------------- runnable README


def readme_script(text: str) -> str:
    """The README's python blocks as one script, each block on its own README lines (so a
    traceback names the README line)."""
    lines: list[str] = []
    for lang, body, first in fenced(text):
        if lang == "python":
            lines += [""] * (first - 1 - len(lines)) + body.splitlines()
    return "\n".join(lines) + "\n"


def expected_output(script: str) -> list[str]:
    """The comment lines that directly follow a `print(` line: what the README says it prints."""
    lines = script.splitlines()
    return [
        nxt.strip()[1:].strip()
        for line, nxt in zip(lines, lines[1:], strict=False)
        if line.lstrip().startswith("print(") and nxt.lstrip().startswith("#")
    ]


def test_readme_python_runs_as_written(tmp_path, monkeypatch, capsys):
    script = readme_script(README.read_text())
    assert script.strip(), "README.md has no ```python block to run"
    shown = expected_output(script)
    assert shown, "README.md's python shows no printed output to check"
    monkeypatch.chdir(tmp_path)
    exec(compile(script, str(README), "exec"), {"__name__": "__readme__"})  # noqa: S102
    assert capsys.readouterr().out.splitlines() == shown
    image = np.asarray(Image.open(tmp_path / "render.png"))
    assert image.shape == (96, 192, 3) and image[:, 96:].std() > 5  # the render is not blank


def test_readme_script_keeps_readme_lines():
    text = "intro\n```python\na = 1\nprint(a)\n# 1\n```\ntext\n```bash\nls\n```\n"
    text += "```python\nb = 2\n```\n"
    script = readme_script(text).splitlines()
    assert script[2:5] == ["a = 1", "print(a)", "# 1"] and script[11] == "b = 2"
    assert expected_output("\n".join(script)) == ["1"]


# --------------------------------------------------------------------------- xprc.NAME mentions


def resolves(dotted: str) -> bool:
    """Whether `xprc.a.b.c` names a module or attribute (importing submodules as needed)."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, name in enumerate(parts[1:], start=2):
        if hasattr(obj, name):
            obj = getattr(obj, name)
            continue
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            return False
    return True


def mentions() -> dict[str, set[str]]:
    """{`xprc.X.Y`: files naming it} over the docs and the string constants of the package."""
    found: dict[str, set[str]] = {}
    for page in PAGES:
        for m in _NAME.finditer(page.read_text()):
            found.setdefault(m.group(0), set()).add(str(page.relative_to(ROOT)))
    for path in sorted((ROOT / "xprc").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for m in _NAME.finditer(node.value):
                    found.setdefault(m.group(0), set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_named_xprc_attribute_exists():
    found = mentions()
    assert {"xprc.fit_config", "xprc.count_entries", "xprc.load"} <= set(found)
    missing = {name: sorted(where) for name, where in found.items() if not resolves(name)}
    assert missing == {}


def test_resolves_tells_missing_names():
    assert resolves("xprc.fit_config") and resolves("xprc.data.ply.load_ply")
    assert resolves("xprc.Camera.stack") and resolves("xprc.train.camera_opt.pose_matrices")
    assert not resolves("xprc.no_such_name") and not resolves("xprc.data.ply.no_such_function")
    assert not resolves("xprc.no_such_module.thing")


def test_public_names_are_documented():
    import xprc

    assert sorted(xprc.__all__) == sorted(set(xprc.__all__))
    undocumented = [n for n in xprc.__all__ if not (getattr(xprc, n).__doc__ or "").strip()]
    assert undocumented == []


# --------------------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def broken_links(page) -> list[str]:
    text = prose(page.read_text())
    bad = []
    for m in _LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md":
            anchors = {slug(h) for h in _HEADING.findall(prose(dest.read_text()))}
            if fragment not in anchors:
                bad.append(f"{target}: no heading '#{fragment}' in {dest.name}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    assert broken_links(page) == []


def test_broken_links_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# A `code` heading: yes\n\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-code-heading-yes) [gone](missing.md) [bad](other.md#not-a-heading)\n"
        '<img src="pic.png"> [web](https://example.com)\n```\n[code](nowhere.md)\n```\n'
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#not-a-heading: no heading '#not-a-heading' in other.md",
        "pic.png: no such file",
    ]


# --------------------------------------------------------------------------- the test command


def test_readme_has_the_one_test_command_ci_runs():
    commands = [
        line.strip()
        for lang, body, _ in fenced(README.read_text())
        if lang == "bash"
        for line in body.splitlines()
        if "pytest" in line
    ]
    assert commands == [TEST_COMMAND]
    ci = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    # CI runs the README's command, then only the second job the README names after it
    assert TEST_COMMAND in ci
    assert ci[ci.index(TEST_COMMAND) + 1 :] == [HEAVY_JOB]
    assert f"`{HEAVY_JOB}`" in README.read_text()


# --------------------------------------------------------------------------- the shipped specs


def spec_lines(path) -> int:
    """The README's 'lines' of a spec: non-blank lines that are not only a comment."""
    lines = path.read_text().splitlines()
    return sum(1 for line in lines if line.strip() and not line.lstrip().startswith("#"))


def test_readme_spec_listing_is_the_spec():
    specs = {p.read_text().splitlines()[0]: p for p in sorted((ROOT / "specs").glob("*.xpr"))}
    listed = [
        (specs[body.splitlines()[0]], body)
        for _, body, _ in fenced(README.read_text())
        if body and body.splitlines()[0] in specs
    ]
    assert [p.name for p, _ in listed] == ["3dgs.xpr"]
    assert [body for _, body in listed] == [p.read_text() for p, _ in listed]


def test_docs_spec_listings_are_the_specs():
    """A docs page that shows a whole shipped spec (a code block opening with its first line,
    as docs/language.md's complete example does) shows it as it is; one that counts its lines
    counts them right (docs/student_t.md)."""
    specs = {p.read_text().splitlines()[0]: p for p in sorted((ROOT / "specs").glob("*.xpr"))}
    shown = 0
    for page in sorted((ROOT / "docs").glob("*.md")):
        for _, body, _ in fenced(page.read_text()):
            if body and body.splitlines()[0] in specs:
                assert body == specs[body.splitlines()[0]].read_text(), page.name
                shown += 1
    assert shown >= 1
    counted = re.search(r"(\d+) non-blank, non-comment lines", (ROOT / "docs" / "student_t.md")
                        .read_text())  # fmt: skip
    assert int(counted.group(1)) == spec_lines(ROOT / "specs" / "student_t.xpr")


def test_readme_spec_table_counts_lines():
    text = prose(README.read_text())
    rows = [line for line in text.splitlines() if line.startswith("|") and "](specs/" in line]
    claimed, counted = {}, {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        names = re.findall(r"\]\(specs/([\w.]+\.xpr)\)", cells[0])
        numbers = cells[2].removesuffix(" each").split(", ")
        if cells[2].endswith(" each"):
            numbers *= len(names)
        claimed.update(zip(names, numbers, strict=True))
        counted.update({n: str(spec_lines(ROOT / "specs" / n)) for n in names})
    assert len(claimed) >= 10 and claimed == counted
