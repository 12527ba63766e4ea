"""Compositing as fused Pallas tile kernels: one grid program per tile (issue 25).

The same maths as `composite.py` (its `group_weights` written out per chunk), generated from the
same spec response: the kernel calls the module's `response` on per-component arrays, so there is
no second copy of any method's formula. Per tile, one program walks the tile's chunks front to
back with a `while_loop`, double-buffering each chunk's lanes from HBM by DMA, and stops as soon
as every pixel of the tile is saturated (T < t_min; unsigned responses only).

Layout inside a program: entries of a chunk on sublanes, the tile's pixels on lanes, so alpha of
a chunk is one [B, P] array; per-entry inputs are [B, 1] columns and per-pixel inputs [1, P] rows.

- lanes [E / B, C, B]: the sorted entries themselves, cut into aligned chunks of B: per entry,
  its primitive's response attributes (A) and composited values (V), C = A + V (one row gather
  by `bins.prim`), a chunk stored [C, B] and transposed in the program: a TPU pads the last
  axis to 128 lanes, so [B, C] took twice the memory (8 GiB at 16,777,216 entries, and as much
  for the cotangents: 3M primitives did not fit a v5e: docs/tpu.md). A tile's list is the
  run tile_start[t] .. tile_start[t + 1] - 1 of it, so its chunks are the aligned ones that
  cover the run; a chunk at either end may hold entries of the neighbouring tiles, which the
  program masks by position (as zeros: no NaN of another primitive can leak). There is no
  per-tile padded copy of the lists (the XLA path's `layout`, whose 1D gather of the capacity
  cost 5.8 ms of a garden frame on a TPU v5e).
- rows [T, 8, P]: per tile, the pixel centres (x, y), the ray origins (x, y, z) and directions
  (x, y, z) of its pixels (zeros without rays).
- output [T, V + K + 2, P]: sum_k w_k values_k, sum_k w_k extra_k (the K per-pixel outputs),
  sum_k w_k, and the count of lanes whose alpha `clamp_alpha` changed, channels on sublanes.

The backward kernel is the custom VJP of `composite_vjp.py` in the same per-tile form: a second
front-to-back walk recomputes each chunk's alpha, takes S_k = g . out - prefix_k, and gets the
attribute and ray cotangents from `jax.vjp` of the response inside the kernel. Cotangents of the
lanes go back by DMA to their chunk (chunks a saturated tile never reached stay zero). A tile's
first chunk may hold the previous tiles' entries, whose cotangents are already written: the
program reads that chunk back and writes its own lanes over it (the tiles run in order, each
waiting for its writes before it ends), so every entry's cotangent is written by its own tile.

On a CPU the kernels run in Pallas's interpret mode (tests compare them with the XLA path there);
`RenderConfig.compositor` selects the backend ("auto": this one on a TPU).
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.extend.core import Var

from ..errors import XprError
from ..method_info import MethodInfo
from .binning import Bins, TileGrid, spread
from .composite_scan import clamp_alpha, tile_pixels
from .config import RenderConfig
from .gather import take_rows

ROWS = 8  # pixel x, y; ray origin x, y, z; ray direction x, y, z
SCAN = "doubling"  # how a chunk's running product and sum are taken (`_along_chunk`)
INTERPRET = None  # None: interpret off a TPU; tests set False to lower the kernels for a TPU
# Interpret mode (the kernels off a TPU) runs one grid step per tile, and a step's cost grows
# with the tile count too (the interpreter carries the whole-grid arrays through its loop; the
# entry capacity does not change it: 512 x 512 took 7.1 s with 1,024 entries, 5.5 s with
# 16,384), so the time grows about with its square. A CPU (3DGS, 10 primitives, 16 px tiles,
# 2026-12-06; the XLA path: under a second each): 256 tiles 0.5 s, 1,024 tiles 7 s, 4,096
# tiles 166 s; 65,536 (4096 x 4096) gave nothing for 150 s and more. A larger grid is refused
# (`interpret_size_problem`).
INTERPRET_MAX_TILES = 1024


class _Components:
    """An array [..., n] seen by a generated response as its n components: `x[..., k]` returns
    component k (an array of its own shape), `x.shape` is the broadcast shape plus (n,)."""

    def __init__(self, comps, shape):
        self._comps = comps
        self.shape = tuple(shape) + (len(comps),)

    def __getitem__(self, key):
        if not (isinstance(key, tuple) and len(key) == 2 and key[0] is Ellipsis):
            raise TypeError(f"a response component is read as x[..., k], not x[{key!r}]")
        return self._comps[key[1]]


def unsupported_reason(method, dtype, config: RenderConfig) -> str | None:
    """Why the Pallas compositor cannot render this method, or None when it can."""
    if config.distortion:
        return "the depth distortion output is composited by the XLA path only"
    if dtype != jnp.float32:
        return f"the Pallas kernels are written for float32 (got {jnp.dtype(dtype).name})"
    if response_reads_camera(method):
        return "the spec's response reads camera fields (the kernels pass none)"
    return None


@functools.cache
def response_reads_camera(method) -> bool:
    """Whether the generated response reads any camera array (traced once per module)."""
    from ..camera import look_at

    cam = look_at([0.0, 0.0, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], 32, 32, dtype=np.float32)
    a = jnp.zeros((1, MethodInfo.of(method).num_attrs), jnp.float32)
    pix = jnp.zeros((1, 2), jnp.float32)
    ray = jnp.zeros((1, 3), jnp.float32)
    leaves, tree = jax.tree_util.tree_flatten(cam)

    def fn(*cam_leaves):
        c = jax.tree_util.tree_unflatten(tree, cam_leaves)
        return method.response(pix, ray, ray, a, c)

    jaxpr = jax.make_jaxpr(fn)(*leaves).jaxpr
    read = [v for eqn in jaxpr.eqns for v in eqn.invars] + list(jaxpr.outvars)
    read = {id(v) for v in read if isinstance(v, Var)}
    return any(id(v) in read for v in jaxpr.invars)


def may_use_pallas(config: RenderConfig) -> bool:
    """Whether `use_pallas` can choose the kernels for `config` (before it checks the method):
    what a caller that prepares for them (the binning's runs) asks."""
    return config.compositor == "pallas" or (
        config.compositor == "auto" and jax.default_backend() == "tpu"
    )


def use_pallas(method, dtype, config: RenderConfig) -> bool:
    """The backend `config.compositor` selects for this method; "pallas" that cannot run is an
    error, "auto" on a TPU that cannot run warns once and uses XLA."""
    if not may_use_pallas(config):
        return False
    reason = unsupported_reason(method, dtype, config)
    if config.compositor == "pallas":
        if reason:
            raise XprError(
                f"RenderConfig(compositor='pallas') cannot render {MethodInfo.of(method).name}: "
                f"{reason}"
            )
        _warn_if_stacked(method, config)
        return True
    if reason:
        _warn_once(f"{MethodInfo.of(method).name}: composited by the XLA path, not the Pallas "
                   f"kernels: {reason}")  # fmt: skip
        return False
    _warn_if_stacked(method, config)
    return True


def _warn_if_stacked(method, config: RenderConfig) -> None:
    """A response with per-pixel outputs but no `stack` keyword (hand-written) gives them
    stacked on a trailing axis, which the kernels must split: slow on a TPU, so say so (not
    with `pixel_outputs=False`: the kernels then take its alpha alone)."""
    info = MethodInfo.of(method)
    if info.pixel_outputs and config.pixel_outputs and not _takes_stack(method.response):
        _warn_once(
            f"{info.name}: its response takes no `stack` keyword, so the Pallas kernels split "
            f"its {len(info.pixel_outputs)} per-pixel outputs from a trailing axis, which a TPU "
            "lays out on its vector lanes (several times slower: docs/tpu.md); a generated "
            "module returns them unstacked with stack=False"
        )


@functools.cache
def _warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=4)


def tile_runs(bins: Bins, chunk: int):
    """Per tile [T]: its first aligned chunk of the sorted entries and how many it spans."""
    start, end = bins.tile_start[:-1], bins.tile_start[1:]
    first = start // chunk
    count = jnp.where(end > start, (end + chunk - 1) // chunk - first, 0)
    return first.astype(jnp.int32), count.astype(jnp.int32)


def pixel_rows(rays, grid: TileGrid, dtype) -> jax.Array:
    """rows [T, 8, P]: pixel centres, ray origins and directions of every tile's pixels."""
    ids = jnp.arange(grid.num_tiles, dtype=jnp.int32)
    pix = tile_pixels(ids, grid, dtype)  # [T, P, 2]
    n, p = pix.shape[0], pix.shape[1]
    if rays is None:
        rest = jnp.zeros((n, p, 6), dtype)
    else:
        origin = jnp.broadcast_to(rays[0], (n, p, 3))
        rest = jnp.concatenate([origin, rays[1]], axis=-1).astype(dtype)
    return jnp.concatenate([pix, rest], axis=-1).transpose(0, 2, 1)


def interpret_size_problem(grid: TileGrid, interpret: bool) -> str | None:
    """Why the kernels would take minutes on this grid (interpret mode, more tiles than
    `INTERPRET_MAX_TILES`), with what to do instead; None when they will not."""
    if not interpret or grid.num_tiles <= INTERPRET_MAX_TILES:
        return None
    return (
        f"RenderConfig(compositor='pallas') off a TPU runs the Pallas kernels in interpret "
        f"mode, whose time grows with the square of the tile count: this {grid.width}x"
        f"{grid.height} image is {grid.num_tiles:,} tiles of {grid.tile}x{grid.tile} pixels, "
        f"over the {INTERPRET_MAX_TILES:,} it allows (1,024 tiles take about 7 s on a CPU, "
        "4,096 about 3 minutes); use compositor='xla' or 'auto' here (the same result to "
        "float32 rounding), or raise xprc.pipeline.composite_pallas.INTERPRET_MAX_TILES to wait"
    )


def composite_pallas(
    response, attrs, values, bins: Bins, rays, grid: TileGrid, config: RenderConfig,
    signed: bool, pixel_channels: int,
):  # fmt: skip
    """Per-tile sums [T, P, V + K + 2], as `composite` returns them; attrs [N, A], values
    [N, V] per primitive. An XprError, before anything runs, for a grid too large for
    interpret mode (`interpret_size_problem`)."""
    interpret = jax.default_backend() != "tpu" if INTERPRET is None else INTERPRET
    problem = interpret_size_problem(grid, interpret)
    if problem is not None:
        raise XprError(problem)
    dtype = attrs.dtype
    b = config.chunk_for(True, bins.prim.shape[0])
    table = jnp.concatenate([attrs, values], axis=-1)
    # one row gather of the sorted entries in whole chunks (slots past the kept entries, the
    # padding included, belong to no tile: the kernels mask them), indexed [E / B, B]
    prim = bins.prim
    if pad := -prim.shape[0] % b:
        prim = jnp.concatenate([prim, jnp.zeros((pad,), prim.dtype)])
    kept = jnp.arange(prim.shape[0], dtype=jnp.int32) < bins.tile_start[-1]
    index = spread(prim, kept, table.shape[0]).reshape(-1, b)  # [E / B, B]
    steps = max(1, math.ceil(math.log2(max(grid.num_tiles, 2))))  # no run passes the grid
    lanes = take_rows(table, index, runs=bins.runs, live=kept.reshape(-1, b), steps=steps)
    lanes = lanes.transpose(0, 2, 1)  # [E / B, C, B]
    first, count = tile_runs(bins, b)
    num_attrs, num_values = attrs.shape[-1], values.shape[-1]
    rows = pixel_rows(rays, grid, dtype)
    central = rays is not None and rays[0].shape[1] == 1
    static = _Static(
        response, grid, b, config.alpha_min, config.t_min, signed, pixel_channels,
        num_attrs, num_values, rays is not None, central, interpret,
    )  # fmt: skip
    out = _core(static, lanes, rows, bins.tile_start, first, count)
    return out.transpose(0, 2, 1)


class _Static:
    """The kernels' static inputs (hashable by identity of the response and values)."""

    def __init__(self, response, grid, chunk, alpha_min, t_min, signed, pixel_channels,
                 num_attrs, num_values, uses_rays, central, interpret):  # fmt: skip
        self.response = response
        self.grid = grid
        self.chunk = chunk
        self.alpha_min = alpha_min
        self.t_min = t_min
        self.signed = signed
        self.k = pixel_channels
        self.a = num_attrs
        self.v = num_values
        self.uses_rays = uses_rays
        self.central = central
        self.interpret = interpret

    def _key(self):
        return tuple(v if k != "response" else id(v) for k, v in sorted(vars(self).items()))

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, _Static) and self._key() == other._key()

    @property
    def out_channels(self) -> int:
        return self.v + self.k + 2

    @property
    def pix(self) -> int:
        return self.grid.tile * self.grid.tile


def _chunk_alpha(st: _Static, lane, rows):
    """A chunk's response: `fn(attr columns, ray rows)` -> ((alpha [B, P] after `clamp_alpha`,
    extra list of K [B, P]), where alpha was clamped [B, P]) with the inputs it closes over, for
    `jax.vjp(..., has_aux=True)` in the backward."""
    attr_cols = [lane[:, k : k + 1] for k in range(st.a)]
    pixel = _Components([rows[0:1], rows[1:2]], (1, st.pix))
    ray_rows = [rows[2:3, 0:1] if st.central else rows[2:3], rows[3:4, 0:1] if st.central
                else rows[3:4], rows[4:5, 0:1] if st.central else rows[4:5],
                rows[5:6], rows[6:7], rows[7:8]]  # fmt: skip

    def fn(cols, rays6):
        shape = (st.chunk, st.pix)
        # Each attribute spread over the pixels before the response reads it: the response's
        # per-primitive arithmetic then runs on [B, P] arrays, not on [B, 1] ones (one lane
        # used of each vector register) broadcast at every use, and the backward sums each
        # attribute's cotangent over the pixels once. 3DGUT's fwd+bwd on a TPU: 41.9 -> 33.6 ms
        # (docs/tpu.md, eighth session).
        attrs = _Components([jnp.broadcast_to(c, shape) for c in cols], shape)
        ro = _Components(list(rays6[:3]), (1, st.pix))
        rd = _Components(list(rays6[3:]), (1, st.pix))
        if st.k:
            # the outputs one array each: stacked [B, P, K], K would sit on the vector lanes
            # (2DGS on a TPU: docs/tpu.md)
            unstacked = _takes_stack(st.response)
            kw = {"stack": False} if unstacked else {}
            alpha, extra = st.response(pixel, ro, rd, attrs, None, **kw)
            if not unstacked:
                extra = [extra[..., k] for k in range(st.k)]
            extra = [jnp.broadcast_to(e, shape) for e in extra]
        else:
            alpha, extra = st.response(pixel, ro, rd, attrs, None), []
        alpha, bad = clamp_alpha(
            jnp.broadcast_to(alpha, shape).astype(jnp.float32), st.signed, st.t_min
        )
        return (alpha, extra), bad

    return fn, attr_cols, ray_rows


def _takes_stack(response) -> bool:
    """Whether the response can return its per-pixel outputs unstacked (`stack=False`, as
    generated modules do; a hand-written one may not)."""
    try:
        return "stack" in inspect.signature(response).parameters
    except (TypeError, ValueError):
        return False


def _along_chunk(x, op):
    """The inclusive scan of x [B, P] along a chunk's entries (axis 0) with `op` (multiply or
    add): by doubling when `SCAN` is "doubling" (log2 B steps, each a sublane roll and one op
    over the whole [B, P] array), else entry by entry (B steps on one [1, P] row each, a chain
    of dependent operations, and the rows gathered back into [B, P])."""
    b = x.shape[0]
    if SCAN == "serial":
        rows = [x[0:1]]
        for k in range(1, b):
            rows.append(op(rows[-1], x[k : k + 1]))
        return jnp.concatenate(rows, axis=0)
    entry = jax.lax.broadcasted_iota(jnp.int32, x.shape, 0)
    shift = 1
    while shift < b:
        x = jnp.where(entry >= shift, op(pltpu.roll(x, np.int32(shift), 0), x), x)
        shift *= 2
    return x


def _weights(st: _Static, alpha, ok, t_in):
    """The compositing of one chunk: used, w, T (before each lane), live, and T after it;
    `ok` [B, 1] the lanes that are the tile's entries."""
    mag = jnp.abs(alpha) if st.signed else alpha
    used = ok & (mag >= st.alpha_min)
    alpha = jnp.where(used, alpha, 0.0)
    keep = 1.0 - alpha
    incl = _along_chunk(keep, jnp.multiply)  # the running product along the list
    first = jax.lax.broadcasted_iota(jnp.int32, keep.shape, 0) == 0
    excl = jnp.where(first, 1.0, pltpu.roll(incl, np.int32(1), 0))  # [B, P]
    T = t_in * excl
    live = used
    if not st.signed:
        live = used & (t_in * incl >= st.t_min)
    w = jnp.where(live, alpha * T, 0.0)
    return alpha, used, w, T, live, t_in * incl[st.chunk - 1 :]


def _lanes_of_tile(st: _Static, bounds_ref, first_ref, tile, j, lane):
    """Chunk j of the tile's run: ([B, 1] which lanes are the tile's entries, the lanes with
    every other one zeroed)."""
    pos = (first_ref[tile] + j) * st.chunk
    pos = pos + jax.lax.broadcasted_iota(jnp.int32, (st.chunk, 1), 0)
    ok = (pos >= bounds_ref[tile]) & (pos < bounds_ref[tile + 1])
    return ok, jnp.where(ok, lane, 0.0)


def _dma(src_hbm, index, dst, sem, slot):
    return pltpu.make_async_copy(src_hbm.at[index], dst.at[slot], sem.at[slot])


def _write(src, slot, dst_hbm, index, sem):
    """The write-back of a chunk's cotangents (a wait needs only the slot and the size)."""
    return pltpu.make_async_copy(src.at[slot], dst_hbm.at[index], sem.at[slot])


def _wait_write(src, index, dst_hbm, start, sem):
    _write(src, jax.lax.rem(index, jnp.int32(2)), dst_hbm, start, sem).wait()


def _walk_chunks(st: _Static, lanes_hbm, start, n, buf, sem, t_ref, chunk_step):
    """The loop both kernels run over a tile's n chunks (chunks start..start+n-1), front to
    back: each chunk's lanes arrive by DMA while the previous one is processed, and the walk
    stops once every pixel is saturated (unsigned responses). `chunk_step(j, slot, lane)`
    processes chunk j (lanes [B, C], buffer `slot` transposed) and returns the transmittance
    after it.
    Returns how many chunks were processed."""

    @pl.when(n > 0)
    def _():
        _dma(lanes_hbm, start, buf, sem, jnp.int32(0)).start()

    t_ref[...] = jnp.ones_like(t_ref)

    def cond(carry):
        j, alive = carry
        return (j < n) & alive

    def body(carry):
        j, _ = carry
        slot = jax.lax.rem(j, jnp.int32(2))
        _dma(lanes_hbm, start + j, buf, sem, slot).wait()

        @pl.when(j + 1 < n)
        def _():
            _dma(lanes_hbm, start + j + 1, buf, sem, jnp.int32(1) - slot).start()

        t_out = chunk_step(j, slot, buf[slot].T)
        t_ref[...] = t_out
        alive = jnp.bool_(True) if st.signed else jnp.max(t_out) >= st.t_min
        return j + 1, alive

    j, _ = jax.lax.while_loop(cond, body, (jnp.int32(0), jnp.bool_(True)))

    @pl.when(j < n)  # stopped early with the next chunk's copy in flight
    def _():
        _dma(lanes_hbm, start + j, buf, sem, jax.lax.rem(j, jnp.int32(2))).wait()

    return j


def _forward_kernel(st: _Static, bounds_ref, first_ref, count_ref, rows_ref, lanes_hbm, out_ref,
                    buf, sem, t_ref):  # fmt: skip
    tile = pl.program_id(0)
    start, n = first_ref[tile], count_ref[tile]
    rows = rows_ref[0]
    out_ref[...] = jnp.zeros_like(out_ref)

    def chunk_step(j, slot, lane):  # lane: [B, C]
        ok, lane = _lanes_of_tile(st, bounds_ref, first_ref, tile, j, lane)
        fn, cols, ray_rows = _chunk_alpha(st, lane, rows)
        (alpha, extra), bad = fn(cols, ray_rows)
        _, used, w, _, _, t_out = _weights(st, alpha, ok, t_ref[...])
        bad = (bad & ok).astype(jnp.float32)
        sums = [jnp.sum(w * lane[:, st.a + c : st.a + c + 1], axis=0, keepdims=True)
                for c in range(st.v)]  # fmt: skip
        sums += [jnp.sum(w * jnp.where(used, e, 0.0), axis=0, keepdims=True) for e in extra]
        sums.append(jnp.sum(w, axis=0, keepdims=True))
        sums.append(jnp.sum(bad, axis=0, keepdims=True))
        out_ref[0] = out_ref[0] + jnp.concatenate(sums, axis=0)
        return t_out

    _walk_chunks(st, lanes_hbm, start, n, buf, sem, t_ref, chunk_step)


def _tile_block(t, *prefetch):
    """Block index of tile t (int32 zeros: under jax_enable_x64 a literal 0 is int64, which
    Mosaic refuses in an index map)."""
    del prefetch
    zero = jnp.zeros((), jnp.int32)
    return t, zero, zero


PREFETCH = 3  # scalar operands: tile_start [T + 1], first chunk [T], chunk count [T]


def _compiler_params(st: _Static, semantics: str):
    """Mosaic's options: the tile axis's semantics, and a scoped VMEM limit of 3/4 of the chip's
    VMEM (Mosaic's default, 16 MiB, is too small for the backward of responses with many
    inputs or per-pixel outputs, such as 2DGS: a compile error on a TPU)."""
    limit = None if st.interpret else _vmem_limit()
    return pltpu.CompilerParams(dimension_semantics=(semantics,), vmem_limit_bytes=limit)


@functools.cache
def _vmem_limit() -> int | None:
    try:
        capacity = int(pltpu.get_tpu_info().vmem_capacity_bytes)
    except Exception:  # not a TPU, or a chip this JAX does not know: Mosaic's default
        return None
    return capacity * 3 // 4


def _interpret(st: _Static):
    return True if st.interpret else False


def _lane_buffers(st: _Static, num_lanes: int):
    """A double buffer of chunks [2, C, B] (as stored) and its two DMA semaphores."""
    return [pltpu.VMEM((2, num_lanes, st.chunk), jnp.float32), pltpu.SemaphoreType.DMA((2,))]


def _grid_spec(st: _Static, more_inputs: list, out_specs, scratch: list):
    """One program per tile; inputs: the tile's pixel rows (a block), the lanes (in HBM), then
    `more_inputs`."""
    return pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=PREFETCH,
        grid=(st.grid.num_tiles,),
        in_specs=[pl.BlockSpec((1, ROWS, st.pix), _tile_block), pl.BlockSpec(memory_space=pl.ANY)]
        + more_inputs,
        out_specs=out_specs,
        scratch_shapes=scratch,
    )


def _forward(st: _Static, lanes, rows, bounds, first, count):
    num_tiles = st.grid.num_tiles
    spec = _grid_spec(
        st, [], pl.BlockSpec((1, st.out_channels, st.pix), _tile_block),
        _lane_buffers(st, lanes.shape[1]) + [pltpu.VMEM((1, st.pix), jnp.float32)],
    )  # fmt: skip
    return pl.pallas_call(
        functools.partial(_forward_kernel, st),
        out_shape=jax.ShapeDtypeStruct((num_tiles, st.out_channels, st.pix), jnp.float32),
        grid_spec=spec,
        compiler_params=_compiler_params(st, "parallel"),
        interpret=_interpret(st),
    )(bounds, first, count, rows, lanes)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _core(st, lanes, rows, bounds, first, count):
    return _forward(st, lanes, rows, bounds, first, count)


def _core_fwd(st, lanes, rows, bounds, first, count):
    out = _forward(st, lanes, rows, bounds, first, count)
    return out, (lanes, rows, bounds, first, count, out)


def _backward_kernel(st: _Static, bounds_ref, first_ref, count_ref, rows_ref, lanes_hbm, g_ref,
                     zero_hbm, d_lanes_hbm, d_rows_ref, buf, sem, obuf, osem, head, hsem, t_ref,
                     s_ref):  # fmt: skip
    del zero_hbm  # aliased to d_lanes_hbm: chunks never reached keep their zeros
    tile = pl.program_id(0)
    start, n = first_ref[tile], count_ref[tile]
    rows = rows_ref[0]
    g = g_ref[0]  # [V + K + 3, P]: g_out channels (the count's zeroed), then g . out
    gv = [g[c : c + 1] for c in range(st.v)]
    ge = [g[st.v + k : st.v + k + 1] for k in range(st.k)]
    gw = g[st.v + st.k : st.v + st.k + 1]
    g_total = g[st.v + st.k + 2 : st.v + st.k + 3]

    d_rows_ref[...] = jnp.zeros_like(d_rows_ref)
    s_ref[...] = jnp.zeros_like(s_ref)
    # the first chunk as the previous tiles left it (their writes ended with their programs)
    read_head = pltpu.make_async_copy(d_lanes_hbm.at[start], head, hsem.at[jnp.int32(0)])
    pl.when(n > 0)(read_head.start)

    def chunk_step(j, slot, lane):
        @pl.when(j >= 2)  # the write-back issued two chunks ago used this slot's buffer
        def _():
            _write(obuf, slot, d_lanes_hbm, start, osem).wait()

        ok, lane = _lanes_of_tile(st, bounds_ref, first_ref, tile, j, lane)
        fn, cols, ray_rows = _chunk_alpha(st, lane, rows)
        (alpha, extra), vjp_fn, _ = jax.vjp(fn, cols, ray_rows, has_aux=True)
        t_in = t_ref[...]
        alpha, used, w, T, live, t_out = _weights(st, alpha, ok, t_in)
        vals = [lane[:, st.a + c : st.a + c + 1] for c in range(st.v)]
        gc = gw + sum(gv[c] * vals[c] for c in range(st.v))  # g . c_k [B, P]
        extra = [jnp.where(used, e, 0.0) for e in extra]
        for k in range(st.k):
            gc = gc + ge[k] * extra[k]
        wg = w * gc
        prefix = s_ref[...] + _along_chunk(wg, jnp.add)  # inclusive prefix of w (g . c)
        run = prefix[st.chunk - 1 :]
        after = g_total - prefix  # S_k
        d_alpha = jnp.where(live, T * gc - after / (1.0 - alpha), 0.0)
        d_extra = [w * ge[k] for k in range(st.k)]
        d_cols, d_rays = vjp_fn((d_alpha, d_extra))
        d_lane = d_cols + [jnp.sum(w * gv[c], axis=1, keepdims=True) for c in range(st.v)]
        d_lane = jnp.concatenate([jnp.broadcast_to(d, (st.chunk, 1)) for d in d_lane], axis=1)

        @pl.when(j == 0)
        def _():
            read_head.wait()
            obuf[slot] = jnp.where(ok, d_lane, head[...].T).T

        @pl.when(j > 0)
        def _():
            obuf[slot] = jnp.where(ok, d_lane, 0.0).T

        _write(obuf, slot, d_lanes_hbm, start + j, osem).start()
        if st.uses_rays:
            for r in range(6):
                d = d_rays[r]
                if d.shape[1] == 1:  # a central camera's origin: one value per tile
                    lane0 = jax.lax.broadcasted_iota(jnp.int32, (1, st.pix), 1) == 0
                    d = jnp.where(lane0, d, 0.0)
                d_rows_ref[0, 2 + r : 3 + r, :] = d_rows_ref[0, 2 + r : 3 + r, :] + d
        s_ref[...] = run
        return t_out

    j = _walk_chunks(st, lanes_hbm, start, n, buf, sem, t_ref, chunk_step)
    for back in (1, 2):  # the write-backs still in flight
        pl.when(j >= back)(functools.partial(_wait_write, obuf, j - back, d_lanes_hbm, start, osem))


def _core_bwd(st, residuals, g_out):
    lanes, rows, bounds, first, count, out = residuals
    g_out = g_out.at[:, -1].set(0.0)  # the clamped-alpha count: no gradient
    g_total = jnp.sum(g_out * out, axis=1, keepdims=True)  # [T, 1, P]
    g = jnp.concatenate([g_out, g_total], axis=1)
    num_lanes = lanes.shape[1]
    spec = _grid_spec(
        st,
        [pl.BlockSpec((1, st.out_channels + 1, st.pix), _tile_block),  # g
         pl.BlockSpec(memory_space=pl.ANY)],  # zeros, aliased to d_lanes
        [pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec((1, ROWS, st.pix), _tile_block)],
        _lane_buffers(st, num_lanes) + _lane_buffers(st, num_lanes) + [
            pltpu.VMEM((num_lanes, st.chunk), jnp.float32),  # the first chunk, read back
            pltpu.SemaphoreType.DMA((1,)),
            pltpu.VMEM((1, st.pix), jnp.float32),
            pltpu.VMEM((1, st.pix), jnp.float32),
        ],
    )  # fmt: skip
    operands = (bounds, first, count, rows, lanes, g, jnp.zeros_like(lanes))
    zeros_at = len(operands) - 1  # operand indices count the scalar-prefetch ones
    d_lanes, d_rows = pl.pallas_call(
        functools.partial(_backward_kernel, st),
        out_shape=(
            jax.ShapeDtypeStruct(lanes.shape, jnp.float32),
            jax.ShapeDtypeStruct(rows.shape, jnp.float32),
        ),
        grid_spec=spec,
        input_output_aliases={zeros_at: 0},  # the zeros -> d_lanes
        # in tile order: a tile reads back the chunk the previous tiles wrote last
        compiler_params=_compiler_params(st, "arbitrary"),
        interpret=_interpret(st),
    )(*operands)
    return d_lanes, d_rows, None, None, None


_core.defvjp(_core_fwd, _core_bwd)
