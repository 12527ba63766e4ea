"""Scale-out with XLA's own distribution: a device mesh, data parallelism over cameras with
`shard_map`, and primitives sharded across the mesh with `jax.sharding`.

Single host:   everything below works on the local devices (GPUs, TPU cores, or simulated CPU
               devices with XLA_FLAGS=--xla_force_host_platform_device_count=N).
Several hosts: call `initialize()` (a thin wrapper of `jax.distributed.initialize`) first in
               every process; the mesh then spans all hosts' devices. See README "Scale-out".
               `xprc train` joins one from the environment (`setup_devices`): XPRC_COORDINATOR
               (HOST:PORT of process 0), XPRC_NUM_PROCESSES, XPRC_PROCESS_ID, and
               XPRC_COORDINATOR_TIMEOUT (seconds to wait for the coordinator and the other
               processes; default 60), and leaves it with `leave` (a barrier, then jax's shutdown).
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import socket
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .conventions import HOST_NAME_PATTERN, IP_ADDRESS_PATTERN
from .errors import XprError
from .method_info import MethodInfo
from .pipeline import RenderConfig
from .pipeline.params import prepare_params
from .pipeline.render import _compiled, check_outputs

AXIS = "devices"


COORDINATOR_TIMEOUT_S = 60  # XPRC_COORDINATOR_TIMEOUT's default (jax.distributed's is 300)
# The environment of a multi-host `xprc train`, read here only (`multi_host_env`).
ENV_COORDINATOR, ENV_PROCESSES, ENV_PROCESS_ID, ENV_TIMEOUT = (
    "XPRC_COORDINATOR",
    "XPRC_NUM_PROCESSES",
    "XPRC_PROCESS_ID",
    "XPRC_COORDINATOR_TIMEOUT",
)
# what `xprc train --devices` says about them
ENV_HELP = (
    f"set {ENV_COORDINATOR}, {ENV_PROCESSES}, {ENV_PROCESS_ID}, and {ENV_TIMEOUT}, the seconds "
    f"to wait for the other processes: {COORDINATOR_TIMEOUT_S} unless set"
)


def initialize(coordinator_address=None, num_processes=None, process_id=None, timeout_s=None):
    """Join a multi-host run (arguments as `jax.distributed.initialize`; None = auto-detect).

    timeout_s: seconds to wait for the coordinator and the other processes, when joining and
    in jax's shutdown (None: jax's 300 for both). A process other than 0 first waits up to
    `timeout_s` for the coordinator's port to accept a connection and raises XprError if it
    never does: jax would abort the whole process (no exception) when its own wait runs out.
    """
    kwargs = {}
    if timeout_s is not None:
        kwargs = {
            "initialization_timeout": int(timeout_s),
            "shutdown_timeout_seconds": int(timeout_s),
        }
    if coordinator_address is not None and process_id not in (None, 0) and timeout_s is not None:
        wait_for_coordinator(coordinator_address, timeout_s)
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
        **kwargs,
    )


def wait_for_coordinator(address: str, timeout_s: float) -> None:
    """Wait until HOST:PORT accepts a TCP connection; XprError naming it after `timeout_s`."""
    host, _, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") else host  # [::1] -> ::1
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            socket.create_connection((host, int(port)), timeout=max(min(left, 5.0), 0.05)).close()
            return
        except socket.gaierror as e:
            raise XprError(
                f"XPRC_COORDINATOR {address}: unknown host '{host}' ({e.strerror})"
            ) from None
        except OSError as e:
            if time.monotonic() + 0.25 >= deadline:
                why = e.strerror or type(e).__name__
                raise XprError(
                    f"no coordinator at {address} after {timeout_s:g} s ({why}): is process 0 "
                    "running there? (XPRC_COORDINATOR; XPRC_COORDINATOR_TIMEOUT sets the wait)"
                ) from None
            time.sleep(0.25)


def setup_devices(devices: str) -> int:
    """`xprc train --devices` ('all' or a count) -> the device count to train on, after joining
    the multi-host run that XPRC_COORDINATOR, XPRC_NUM_PROCESSES, XPRC_PROCESS_ID and
    XPRC_COORDINATOR_TIMEOUT describe (when XPRC_COORDINATOR is set)."""
    joining = multi_host_env()
    if joining is not None:
        address, processes, process_id, timeout = joining
        print(
            f"joining the multi-host run at {address} as process {process_id} of {processes} "
            f"(waiting up to {timeout} s: XPRC_COORDINATOR_TIMEOUT)",
            file=sys.stderr,
            flush=True,  # before jax, which may abort the process when its wait runs out
        )
        try:
            initialize(address, processes, process_id, timeout)
        except (RuntimeError, ValueError) as e:  # a port in use, ...
            first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            raise XprError(f"could not join the multi-host run at {address}: {first}") from None
        _JOINED.update(process_id=process_id, processes=processes, timeout=timeout)
    if devices == "all":
        return jax.device_count()
    if not _ASCII_INT.fullmatch(str(devices)):
        raise XprError(f"--devices must be a number or 'all', not {ascii(str(devices))[:60]}")
    n = int(devices)
    if not 1 <= n <= jax.device_count():
        raise XprError(
            f"--devices {n}: must be from 1 to the {jax.device_count()} device(s) available "
            f"({jax.default_backend()})"
        )
    return n


_JOINED: dict = {}  # the run `setup_devices` joined: process_id, processes, timeout


def leave(status: int) -> int:
    """End this process's part in the multi-host run `setup_devices` joined (nothing when it
    joined none); `status` is the exit status the process will end with; returns the one to
    use instead.

    jax's own shutdown (an atexit handler) waits for every process at a barrier and, when one
    does not come in time (it stopped early, failed, was killed, or is still training on its
    own), aborts the process with SIGABRT from a background thread: no message of xprc's, exit
    status 134. Here every process first waits at a barrier of its own, up to the timeout,
    which fails as an exception: then the process says which wait ran out and exits with
    status 1 (or `status`, if not 0) without jax's shutdown; otherwise jax's shutdown runs
    now, all processes being there.
    """
    if not _JOINED:
        return status
    joined = dict(_JOINED)
    _JOINED.clear()
    state = jax._src.distributed.global_state
    if state.client is None:  # shut down already (jax.distributed.shutdown)
        return status
    try:
        state.client.wait_at_barrier("xprc_leave", joined["timeout"] * 1000)
    except Exception as e:  # jax raises JaxRuntimeError (DEADLINE_EXCEEDED) after the timeout
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        first = first.split(". ")[0][:200]  # DEADLINE_EXCEEDED: Barrier timed out
        print(
            f"error: multi-host run: process {joined['process_id']} of {joined['processes']} "
            f"ended, but not all the others did within {joined['timeout']} s "
            f"(XPRC_COORDINATOR_TIMEOUT; one stopped early, failed or was killed?): exiting "
            f"without them ({first})",
            file=sys.stderr,
            flush=True,
        )
        _abandon(state, status or 1)
        return status or 1
    jax.distributed.shutdown()
    return status


def collective_error(err: BaseException) -> XprError | None:
    """In a multi-host run `setup_devices` joined, a JaxRuntimeError (a step's exchange with
    the other processes failing: one was stopped or killed) as a one-line XprError; else None.
    """
    if not _JOINED or not isinstance(err, jax.errors.JaxRuntimeError):
        return None
    first = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
    return XprError(
        f"multi-host run: process {_JOINED['process_id']} of {_JOINED['processes']} "
        f"stopped: a computation with the other processes failed (one stopped, failed or was "
        f"killed?): {first}"
    )


_ABANDONED: list = []  # jax's distributed client and service, kept from their destructors


def _abandon(state, status: int) -> None:
    """Leave the multi-host run without jax's shutdown barrier, whose failure aborts the
    process: jax's atexit shutdown finds nothing to shut down, the other exit handlers run,
    then the process ends with `status` before the interpreter would destroy the client."""
    _ABANDONED.extend((state.preemption_sync_manager, state.client, state.service))
    state.preemption_sync_manager = state.client = state.service = None

    def exit_now() -> None:
        atexit.unregister(exit_now)
        atexit._run_exitfuncs()  # the handlers registered before this one
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    atexit.register(exit_now)  # the last registered runs first


def multi_host_env() -> tuple[str, int, int, int] | None:
    """(coordinator HOST:PORT, process count, this process's id, timeout in seconds) from the
    environment, or None when XPRC_COORDINATOR is not set (a single-host run); a malformed
    value is an XprError naming its variable."""
    if not os.environ.get(ENV_COORDINATOR):
        return None
    address = _coordinator(os.environ[ENV_COORDINATOR])
    processes = _env_int(ENV_PROCESSES, 1)
    process_id = _env_int(ENV_PROCESS_ID, 0, processes)
    timeout = _env_int(ENV_TIMEOUT, 1, 86401, COORDINATOR_TIMEOUT_S)
    return address, processes, process_id, timeout


def _coordinator(text: str) -> str:
    """XPRC_COORDINATOR as HOST:PORT (a name, an IPv4 address or a [bracketed] IPv6 one, and a
    port in 1..65535); anything else is an XprError, not a wait for a coordinator that cannot
    exist."""
    host, sep, port = text.rpartition(":")
    name_ok = re.fullmatch(rf"{HOST_NAME_PATTERN}|\[{IP_ADDRESS_PATTERN}\]", host) is not None
    if not (sep and name_ok and port.isdigit() and port.isascii() and 1 <= int(port) <= 65535):
        raise XprError(
            f"XPRC_COORDINATOR is {text[:80]!r}: it must be HOST:PORT (e.g. host0:1234), "
            "a port in 1..65535"
        )
    return text


_ASCII_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _env_int(name: str, low: int, below: int | None = None, default: int | None = None) -> int:
    """An integer environment variable of a multi-host run (XPRC_COORDINATOR is set), in
    [low, below); missing (without a default) or anything else is an XprError naming it."""
    text = os.environ.get(name)
    if text is None and default is not None:
        return default
    # ASCII digits only: int() also reads '1_0' as 10 and '٠' (Arabic-Indic) as 0
    value = int(text) if text is not None and _ASCII_INT.fullmatch(text) else None
    if value is None or value < low or (below is not None and value >= below):
        allowed = f"an integer >= {low}" if below is None else f"an integer in {low}..{below - 1}"
        got = "is not set" if text is None else f"is {ascii(text[:40])}"
        raise XprError(f"{name} {got}: XPRC_COORDINATOR is set, so it must be {allowed}")
    return value


def device_mesh(num_devices: int | None = None) -> Mesh:
    """A 1-D mesh over the first `num_devices` devices (all when None)."""
    devices = jax.devices()
    n = len(devices) if num_devices is None else num_devices
    if n < 1 or n > len(devices):
        raise XprError(f"asked for {n} devices, {len(devices)} available ({jax.default_backend()})")
    return Mesh(np.asarray(devices[:n]), (AXIS,))


def shard_primitives(params: dict, mesh: Mesh) -> dict:
    """Place each parameter's primitive axis across the mesh (N must divide evenly: pad with
    inactive primitives, e.g. opacity logit -20, to a multiple of the device count)."""
    n = next(iter(params.values())).shape[0]
    if n % mesh.size:
        raise XprError(
            f"{n} primitives do not split evenly over {mesh.size} devices; pad to a multiple"
        )
    return {
        k: jax.device_put(v, NamedSharding(mesh, P(AXIS, *([None] * (np.ndim(v) - 1)))))
        for k, v in params.items()
    }


def replicate(tree, mesh: Mesh):
    """Copy a pytree to every device of the mesh."""
    return jax.device_put(tree, NamedSharding(mesh, P()))


def sharded_views(method, per_view, mesh: Mesh, mode="RGB", config: RenderConfig | None = None):
    """`(params, cameras [B], targets [B], background, extra) -> (sums, stats)` with the camera
    batch split across the mesh (`shard_map`); XLA all-reduces the sums (and, in the backward
    pass, the gradients). The one sharded loss of xprc: `data_parallel_loss` and the trainer
    both build on it.

    per_view(out: RenderOutput, target, extra) -> {name: scalar} for one camera; `sums` holds
    each name summed over the batch, `stats` the largest `dropped`, `entries_needed` and
    `nonfinite` of any camera and the batch's totals of `alpha_out_of_range` and
    `lens_outside` (pixels: each camera is its own image). `params` must
    already be checked (`prepare_params`).
    """
    config = config or RenderConfig()
    check_outputs(MethodInfo.of(method), mode, config)  # as `render` does: no silent sort depth
    render_batch = _compiled(method, mode, config, True)

    def local(params, cameras, targets, background, extra):
        out = render_batch(params, cameras, background)
        values = jax.vmap(per_view, in_axes=(0, 0, None))(out, targets, extra)
        sums = {k: jax.lax.psum(jnp.sum(v), AXIS) for k, v in values.items()}
        stats = {
            k: jax.lax.pmax(jnp.max(out.stats[k]).astype(jnp.int32), AXIS)
            for k in ("dropped", "entries_needed", "nonfinite")  # the same primitives per view
        }
        for k in ("alpha_out_of_range", "lens_outside"):  # per pixel: summed over the views
            stats[k] = jax.lax.psum(jnp.sum(out.stats[k]).astype(jnp.int32), AXIS)
        return sums, stats

    return jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(P(), P(AXIS), P(AXIS), P(), P()),
        out_specs=(P(), P()),
        # The compositor's skip branch yields constants, which the varying-axis check cannot
        # type; the outputs are made replicated explicitly by the psum / pmax above.
        check_vma=False,
    )


def data_parallel_loss(method, loss_fn, mesh: Mesh, mode="RGB", config: RenderConfig | None = None):
    """A jitted `(params, cameras, targets, background) -> mean loss` over a camera batch split
    across the mesh; differentiate it with `jax.grad` (XLA inserts the all-reduce).

    loss_fn(out: RenderOutput, target) -> scalar, for one camera. `cameras` is a batched Camera
    whose batch size is a multiple of the mesh size; targets have the same leading axis.
    """
    sharded = sharded_views(
        method, lambda out, target, _: {"loss": loss_fn(out, target)}, mesh, mode, config
    )

    @jax.jit
    def loss(params, cameras, targets, background):
        params = prepare_params(method, params)
        sums, _ = sharded(params, cameras, targets, background, ())
        return sums["loss"] / targets.shape[0]

    return loss


@functools.cache
def _single_loss(method, loss_fn, mode, config):
    render_batch = _compiled(method, mode, config, True)

    def loss(params, cameras, targets, background):
        out = render_batch(params, cameras, background)
        return jnp.mean(jax.vmap(loss_fn)(out, targets))

    return jax.jit(loss)


def reference_loss(method, loss_fn, mode="RGB", config: RenderConfig | None = None):
    """The same mean loss on one device, for comparison with the sharded versions."""
    config = config or RenderConfig()
    check_outputs(MethodInfo.of(method), mode, config)
    inner = _single_loss(method, loss_fn, mode, config)

    def loss(params, cameras, targets, background):
        return inner(prepare_params(method, params), cameras, targets, background)

    return loss
