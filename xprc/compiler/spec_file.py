"""Reading a spec file. Spec paths are untrusted (docs/input-validation.md): only a regular
file of at most MAX_SPEC_BYTES is read, and anything else is an XprError naming the path."""

from __future__ import annotations

import os
import pathlib
import re
import stat

from xprc.errors import XprError

MAX_SPEC_BYTES = 1 << 20  # the shipped specs are under 8 KiB


class _Refused(Exception):
    pass


_LONE_CR = re.compile(r"\r(?!\n)")


def read_spec(path: pathlib.Path) -> str:
    """The text of the spec at `path`. Only a regular file of at most MAX_SPEC_BYTES is read
    (a FIFO would block, /dev/zero never ends); anything else raises an XprError."""
    path = pathlib.Path(path)
    too_big = f"larger than {MAX_SPEC_BYTES // 1024} KiB"
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise _Refused("is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise _Refused("not a regular file")
        if st.st_size > MAX_SPEC_BYTES:
            raise _Refused(too_big)
        with open(path, "rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
        if len(data) > MAX_SPEC_BYTES:
            raise _Refused(too_big)
        # a UTF-8 byte-order mark (Windows editors write one) is not part of the text, and a
        # lone CR (classic Mac line ends) is a line break, as every editor shows it
        return _LONE_CR.sub("\n", data.decode("utf-8-sig"))
    except OSError as e:
        problem = e.strerror or str(e)
    except (UnicodeDecodeError, _Refused) as e:
        problem = str(e)
    raise XprError(f"cannot read spec: {problem}", filename=str(path))
