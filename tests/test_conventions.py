"""xprc.conventions: knowledge defined once, and the places that read it agree with it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from xprc.cli.render import _kind_name
from xprc.conventions import MAX_NAME, NAME_PATTERN, is_name
from xprc.data.spec_ply import read_comments, spec_comments, unnameable
from xprc.errors import DataError
from xprc.memory import size_text

GRAMMAR = Path(__file__).resolve().parents[1] / "grammar" / "xpr.lark"
SHA = "ab" * 32


def test_name_pattern_is_the_grammars_name_with_a_bound():
    grammar = re.search(r"^NAME: /(.*)/$", GRAMMAR.read_text(), re.M)
    assert grammar is not None
    assert NAME_PATTERN == grammar[1].removesuffix("*") + "{0,99}" and MAX_NAME == 100


NAMES = {
    "Gaussian3D": True,
    "_x": True,
    "a" * MAX_NAME: True,
    "a" * (MAX_NAME + 1): False,
    "3dgs": False,
    "": False,
    "a-b": False,
    "a b": False,
    "caf\u00e9": False,  # the grammar's letters are ASCII
    "a\n": False,
}


@pytest.mark.parametrize("text", NAMES)
def test_every_reader_of_a_name_agrees(text, tmp_path):
    """--kind, a module's NAME written into a PLY header and the header read back accept the
    same names: those of NAME_PATTERN (one definition, xprc.conventions)."""
    ok = NAMES[text]
    assert is_name(text) is ok
    if ok:
        assert _kind_name(text) == text
        assert unnameable(text, SHA) is None and unnameable(text, "") is None
        (comment,) = spec_comments(text, SHA)
        spec, _ = read_comments(tmp_path / "s.ply", [comment])
        assert (spec.name, spec.sha256) == (text, SHA)
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="invalid kind"):
            _kind_name(text)
        assert unnameable(text, SHA).endswith("is not an identifier")
        with pytest.raises(ValueError, match="not a spec's name"):
            spec_comments(text, SHA)
        with pytest.raises(DataError, match="unrecognised PLY header comment"):
            read_comments(tmp_path / "s.ply", [f"xprc spec {text} sha256 {SHA}"])


def test_a_sha256_that_is_not_hex_cannot_name_a_spec():
    assert unnameable("Box", "AB" * 32) == f"the method's SPEC_SHA256 '{'AB' * 20}' is not a sha256"
    assert unnameable("Box", SHA[:-1]) is not None


@pytest.mark.parametrize(
    "n, text",
    [(0, "0 bytes"), (1023, "1023 bytes"), (1024, "1.0 KiB"), (20_000, "19.5 KiB"),
     ((1 << 20) - 1, "1,024.0 KiB"), (1 << 20, "1.0 MiB"), (1_959_552_000, "1.8 GiB"),
     (3 << 40, "3,072.0 GiB"), (1536.7, "1.5 KiB")],
)  # fmt: skip
def test_sizes_are_written_one_way(n, text):
    """xprc.memory.size_text: every message that states a size (data loaders, the trainer's
    capacity and image checks, the render's memory budget) writes it through this one."""
    assert size_text(n) == text


HOSTS = {"127.0.0.1": True, "node-3.cluster": True, "::1": True, "a" * 253: True,
         "a" * 254: False, "": False, "host name": False, "h\u00f6st": False}  # fmt: skip


@pytest.mark.parametrize("host", HOSTS)
def test_a_host_is_one_pattern_for_view_and_the_coordinator(host):
    """`xprc view --host` and XPRC_COORDINATOR's HOST read the same names and addresses
    (xprc.conventions); the coordinator's IPv6 address is in brackets, as HOST:PORT needs."""
    from xprc.cli.args import host_name
    from xprc.distributed import _coordinator
    from xprc.errors import XprError

    bracketed = f"[{host}]" if ":" in host else host
    if HOSTS[host]:
        assert host_name(host) == host and _coordinator(f"{bracketed}:1234")
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="expected a host name"):
            host_name(host)
        with pytest.raises(XprError, match="it must be HOST:PORT"):
            _coordinator(f"{bracketed}:1234")
    if ":" in host:  # an IPv6 address without its brackets is not a coordinator's HOST
        with pytest.raises(XprError, match="it must be HOST:PORT"):
            _coordinator(f"{host}:1234")
