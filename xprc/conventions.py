"""The shared vocabulary: names and constants that the compiler, the cameras, the data loaders
and the trainer must agree on, defined once here.

Nothing here imports xprc or JAX, so every layer may import it.
"""

import re

# Camera models, in the order messages list them. xprc.camera.models maps each to its module;
# a spec's `cameras` declaration names some of them.
CAMERA_MODELS = ("pinhole", "opencv", "fisheye", "ortho")

# Lens coefficients a camera carries: [k1, k2, k3, k4, k5, k6, p1, p2, s1, s2, s3, s4] for
# `opencv` (radial, tangential, thin prism; not OpenCV's own order), k1..k4 first for `fisheye`.
NUM_DIST = 12

# Parameter roles a spec may declare (`role position`); the trainer's strategies read them.
PARAM_ROLES = ("position", "opacity", "scale")

# The degree-0 real spherical harmonic, 1 / (2 sqrt(pi)): colour = SH_C0 * sh[0] + 0.5 in 3DGS.
SH_C0 = 0.28209479177387814

# A spec's names (its primitive, parameters and per-pixel outputs) are grammar/xpr.lark's NAME:
# a letter or _, then letters, digits and _. The grammar sets no length; a name that comes back
# from outside the compiler (a PLY header, a method module's NAME, `xprc render --kind`) is
# untrusted text and is also held to MAX_NAME characters: NAME_PATTERN is that bounded form
# (tests/test_conventions.py checks it against the grammar's).
MAX_NAME = 100
NAME_PATTERN = rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_NAME - 1}}}"

# A host to listen on (`xprc view --host`) or to reach (XPRC_COORDINATOR's HOST): a name of at
# most 253 characters (DNS's limit), or an IP address (IPv4, or IPv6 of at most 45 characters,
# which HOST:PORT puts in brackets).
HOST_NAME_PATTERN = r"[A-Za-z0-9._-]{1,253}"
IP_ADDRESS_PATTERN = r"[0-9A-Fa-f:.]{2,45}"


def is_name(text: str) -> bool:
    """Whether `text` is a spec's name of at most MAX_NAME characters (NAME_PATTERN)."""
    return re.fullmatch(NAME_PATTERN, text) is not None
