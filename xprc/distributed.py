"""Scale-out with XLA's own distribution: a device mesh, data parallelism over cameras with
`shard_map`, and primitives sharded across the mesh with `jax.sharding`.

Single host:   everything below works on the local devices (GPUs, TPU cores, or simulated CPU
               devices with XLA_FLAGS=--xla_force_host_platform_device_count=N).
Several hosts: call `initialize()` (a thin wrapper of `jax.distributed.initialize`) first in
               every process; the mesh then spans all hosts' devices. See README "Scale-out".
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .errors import XprError
from .pipeline import RenderConfig
from .pipeline.render import _compiled, prepare_params

AXIS = "devices"


def initialize(coordinator_address=None, num_processes=None, process_id=None) -> None:
    """Join a multi-host run (arguments as `jax.distributed.initialize`; None = auto-detect)."""
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
    )


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
    each name summed over the batch, `stats` the largest `dropped` and `entries_needed` of any
    camera. `params` must already be checked (`prepare_params`).
    """
    config = config or RenderConfig()
    render_batch = _compiled(method, mode, config, True)

    def local(params, cameras, targets, background, extra):
        out = render_batch(params, cameras, background)
        values = jax.vmap(per_view, in_axes=(0, 0, None))(out, targets, extra)
        sums = {k: jax.lax.psum(jnp.sum(v), AXIS) for k, v in values.items()}
        stats = {
            k: jax.lax.pmax(jnp.max(out.stats[k]).astype(jnp.int32), AXIS)
            for k in ("dropped", "entries_needed")
        }
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
    inner = _single_loss(method, loss_fn, mode, config)

    def loss(params, cameras, targets, background):
        return inner(prepare_params(method, params), cameras, targets, background)

    return loss
