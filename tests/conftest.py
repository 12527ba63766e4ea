"""Test configuration: strict JAX promotion rules (silent broadcasting fails loudly) and x64.

float64 is enabled so gradient checks against finite differences are meaningful; tests of the
float32 path create float32 arrays explicitly.
"""

import functools
import importlib.util
import os
import pathlib

os.environ.setdefault("XPRC_CACHE_DIR", str(pathlib.Path(__file__).parent / ".xprc_cache"))
# no persistent JAX compilation cache in the tests (tests/test_compile_cache.py turns it on)
os.environ.setdefault("XPRC_JAX_CACHE_DIR", "off")

import jax  # noqa: E402
import pytest  # noqa: E402

from xprc.data.workloads import default_garden_path  # noqa: E402


def _tpu_attached() -> bool:
    """A TPU chip on this machine's PCI bus (read the way JAX finds one, without opening it)."""
    try:
        from jax._src import hardware_utils

        return hardware_utils.num_available_tpu_chips_and_device_id()[0] > 0
    except Exception:  # noqa: BLE001 - a private helper: no TPU known is the safe answer
        return False


TPU = _tpu_attached()
if TPU:
    # One process at a time may hold a TPU chip: this one does (jax read JAX_PLATFORMS when it
    # was imported, above); the subprocesses that tests start run on the CPU.
    os.environ["JAX_PLATFORMS"] = "cpu"


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: `-p no:xdist` runs too
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject.toml): no worker processes beside a TPU, which one process holds."""
    return 0 if TPU else None


XDIST_WORKERS = 2  # the most worker processes of a plain `python -m pytest`


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config):
    """Where pytest-xdist is loaded: without `-n`, `-n auto --maxprocesses 2`; with workers and
    no `--dist`, `--dist loadgroup` (each test file on one worker, pytest_collection_modifyitems
    below). Set here rather than in pyproject.toml's addopts, which would make `-p no:xdist` a
    usage error. Runs before xdist's own pytest_cmdline_main, which starts from these."""
    option = config.option
    # a worker process gets the controller's options as they are
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        if option.numprocesses is None:
            option.numprocesses = "auto"
            if option.maxprocesses is None:
                option.maxprocesses = XDIST_WORKERS
        if option.numprocesses != 0 and option.dist == "no":
            option.dist = "loadgroup"
    return (yield)


SLOW_TIMEOUT_S = 7200  # the hang guard of a test marked slow (pyproject.toml: 1200 s for others)
HEAVY_LIST = pathlib.Path(__file__).with_name("heavy_tests.txt")


def heavy_ids(path: pathlib.Path = HEAVY_LIST) -> list[str]:
    """The node ids tests/heavy_tests.txt lists (CI's second job, `-m heavy`)."""
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under xdist (`--dist loadgroup`, pyproject.toml) each test file runs on one worker, so
    its module fixtures and compiled programs are shared; a file that names a parameter in
    `XDIST_SPLIT_BY` is split by that parameter's value (test_conformance.py: one group per
    spec, so its specs run on different workers). Slow tests get a longer hang guard. A test
    listed in tests/heavy_tests.txt is marked `heavy`."""
    heavy = set(heavy_ids())
    for item in items:
        if item.nodeid in heavy:
            item.add_marker(pytest.mark.heavy)
        group = item.nodeid.split("::")[0]
        key = getattr(item.module, "XDIST_SPLIT_BY", None)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if key in params:
            group += f":{params[key]}"  # no ']' after the '@': xdist reads the group after it
        item.add_marker(pytest.mark.xdist_group(group))
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            if config.pluginmanager.hasplugin("timeout"):  # its marker, where it is loaded
                item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


def pytest_terminal_summary(terminalreporter, config):
    """Said at the end of a run (with -q too) where pytest-timeout is not loaded: no hang
    guard then (the test extra installs it; pyproject.toml's `timeout` is its option)."""
    if not config.pluginmanager.hasplugin("timeout"):
        terminalreporter.write_line(
            "pytest-timeout is not loaded: no hang guard in this run (pip install pytest-timeout)"
        )


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
# ../shared/data/garden unless XPRC_GARDEN names another copy (as on a machine without ../shared)
GARDEN = default_garden_path()


def import_file(path: pathlib.Path, name: str | None = None):
    """The Python file at `path` (a benchmark or an example, which are not packages) imported
    as a module named `name` (default: the file's stem)."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.cache
def load_handwritten():
    """The hand-written 3DGS baseline (benchmarks/handwritten_3dgs.py), imported once."""
    return import_file(ROOT / "benchmarks" / "handwritten_3dgs.py")


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_code():
    """Drop compiled executables after each test module. Every XLA executable keeps memory
    mappings, and one process that compiles the whole suite's programs approaches the kernel's
    per-process limit (vm.max_map_count, 65,530 here), where XLA's compiler crashes."""
    yield
    import importlib

    importlib.import_module("xprc.pipeline.render")._jitted.cache_clear()
    importlib.import_module("xprc.pipeline.capacity")._count_fn.cache_clear()
    jax.clear_caches()


# The shipped 3DGS and Student-t specs before their determinant without cancellation
# (2026-12-06): today's text edited back, for the tests of runs trained with earlier versions
# (xprc.trained.EARLIER_SHIPPED).
_OPACITY = (
    "  emit opacity = where(antialiased != 0, opacities * sqrt(max({} / det2, 0.005^2)), opacities)"
)
_DETERMINANT_EDITS = {
    "3dgs": (
        "\n".join(
            [
                "  # det(cov2d) = det(A A^T), A = J M, as the sum of A's squared 2x2 minors "
                "(Cauchy-Binet):",
                "  # a * c - b^2 cancels, and loses a long thin footprint's determinant in float32",
                "  minors = cross(row(J * M, 0), row(J * M, 1))",
                "  det2d = dot(minors, minors)",
                "  det2  = max(det2d + eps2d * (cov2d[0, 0] + cov2d[1, 1]) + eps2d^2, 1e-10)",
                _OPACITY.format("det2d"),
            ]
        ),
        "\n".join(["  det2  = max(det(cov2), 1e-10)", _OPACITY.format("det(cov2d)")]),
    ),
    "student_t": (
        "  minors = cross(row(J * M, 0), row(J * M, 1))   "
        "# det(J M M^T J^T), without cancellation\n"
        "  det2 = max(dot(minors, minors) + eps2d * (cov2[0, 0] + cov2[1, 1]) - eps2d^2, 1e-10)",
        "  det2 = max(det(cov2), 1e-10)",
    ),
}


def before_determinant(name: str, text: str) -> str:
    """A shipped spec's text as it was before the determinant change (unchanged if it had none)."""
    if name not in _DETERMINANT_EDITS:
        return text
    new, old = _DETERMINANT_EDITS[name]
    assert text.count(new) == 1, name
    return text.replace(new, old)
