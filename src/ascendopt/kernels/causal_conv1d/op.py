"""causal_conv1d: depthwise causal convolution (W = 2..4 taps), forward and backward, varlen.

    y = act(conv(x, weight) + bias) + residual,    act = identity | silu

x ``[B,T,D]`` (varlen: ``B == 1`` with ``cu_seqlens`` int32 or int64), weight ``[D,W]``, bias ``[D]``,
residual ``[B,T,D]``, initial_state / final_state ``[N,D,W-1]`` (the last W-1 inputs of each
sequence; slot W-2 is the newest). Kernels (this package): ``fwd.py`` and ``bwd.py``
(launchers and kernels), ``plan.py`` (bulk/tail tile sets), ``tiles.py``
and ``rows.py`` (the tap paths of tunable TAPS); this module holds the public entry,
the fp32 torch oracle and the ``KernelSpec``.

Spec conventions: ``dims`` holds the extents ``B, T, D, W`` (or ``seqlens, D, W``) and 0/1 feature
flags ``act`` (silu), ``bias``, ``residual``, ``state`` (initial state in, final state out).
``make_inputs`` adds the non-tensor ``activation`` ("silu" or None) to the inputs dict.
"""

from __future__ import annotations

from ascendopt.device.ub import DEFAULT_MARGIN as UB_MARGIN  # as fla's vector kernels (l2norm, layernorm)
from ascendopt.device.ub import dtype_bytes
from ascendopt.kernels._lib.common import torch_dtype
from ascendopt.kernels.causal_conv1d.bwd import causal_conv1d_bwd
from ascendopt.kernels.causal_conv1d.fwd import causal_conv1d_fwd
from ascendopt.kernels.causal_conv1d.plan import masked_bd
from ascendopt.kernels.spec import Cost, KernelSpec, ShapePreset, Tunable, UBStage

__all__ = ["SPEC", "causal_conv1d", "causal_conv1d_bwd", "causal_conv1d_forward_reference", "causal_conv1d_fwd",
           "causal_conv1d_reference"]

# Live [BT, BD] tile copies in fp32 units (our count of the kernels' live sets; fp32 inputs, the
# worst case). fwd: one tap tile double-buffered by the compiler (2) + its fp32 copy (1) + the
# accumulator (1) + residual/output tile (1) = 5. bwd with silu: dy tile double-buffered (2) + x tap
# tile double-buffered (2) + its fp32 copy (1) + z (1) + sigmoid/dz temporaries (1) + dx accumulator
# (1) + dz of row shift 0 kept for dweight (1) = 9. Cross-check: fla's Ascend bwd failed at 64x128 fp32
# (~200 KB needed, cases.md), i.e. >= 6 live copies, and its fwd at 128x128 (req ~390 KB, ~6 copies).
FWD_MEM_MULT = 5.0
BWD_MEM_MULT = 9.0
# gather path: + the HB-row halos and one shifted copy (fwd), + right halos, kept shifted x taps (bwd)
FWD_GATHER_MULT = 6.0
BWD_GATHER_MULT = 12.0
# row path: live [BD] rows, not tiles. fwd: 3 previous rows + a 4-row block double-buffered (8) + 4 taps
# + bias + z/output temporaries (2) = 18. bwd: 3 previous x + 3 previous dz rows + 4-row blocks of x
# and dy double-buffered (16) + 4 taps + bias + 5 dweight/dbias accumulators + 4 dz + 4 dx rows = 40.
FWD_ROWS_MULT = 18.0
BWD_ROWS_MULT = 40.0
FIN_MEM_MULT = 3.0  # finalize: accumulator + double-buffered partial tile

# TAPS values (0 = auto) and the auto choices per backend. The row path issues [BD]-row DMAs and
# evaluates act'(z) once per element (the tile paths W times in the bwd): on sm_90 its inner loops
# compile to ~22 (fwd) / ~36 (bwd) instructions per element against ~31 / ~128 for the tile path.
# Ascend keeps the tile path the seed describes (big 2-D DMAs, UB-modelled [BT, BD] tiles).
TAPS_TILES, TAPS_GATHER, TAPS_ROWS = 1, 2, 3
# AHEAD (row path, fwd): 4-row blocks loaded ahead; FWD_GRID: 1 = one program per task (up to
# grid_size's cap), 2 = programs an SM holds at once (kernels._lib.resident; CUDA, else as 1); BWD_GRID:
# 1 = up to 4 bwd programs per core, 2 = up to the programs an SM holds (see bwd._grid); on
# cuda 2: H200 forward+backward device time 288.5 -> 248.1 us (realistic), 309.4 -> 269.8 (varlen), 3 programs
# an SM, the first call's dweight equal to later calls' bit for bit (benchmarks/RESULTS.md, CUDA defaults).
# SILU on cuda: the exp2 form, H200 B4_T4096_D4096_W4 forward 73.4 us against 76.2 us for z * sigmoid(z)
# (profiled kernel time, tools/stage_breakdown.py; benchmarks/RESULTS.md, CUDA defaults).
# EDGES/BT_EDGE on cuda: bulk tiles W-1 rows into each sequence, the rows left as 8-row masked-row pieces on a side
# stream (7). H200 forward, four runs against EDGES=4 (benchmarks/RESULTS.md, CUDA defaults): varlen 74.4-75.0 us
# against 74.8-75.8, realistic 73.9-74.2 against 74.1-74.5; the gate's check passes.
_AUTO = {
    "cuda": {"TAPS": TAPS_ROWS, "BT": 64, "BD": 512, "BT_BWD": 32, "BD_BWD": 512, "AHEAD": 1, "FWD_GRID": 1,
             "BWD_GRID": 2, "SILU": 2, "EDGES": 7, "BT_EDGE": 8},
    "other": {"TAPS": TAPS_TILES, "BT": 32, "BD": 128, "BT_BWD": 32, "BD_BWD": 128, "AHEAD": 1, "FWD_GRID": 1,
              "BWD_GRID": 1, "SILU": 1, "EDGES": 1},
}

_FLAG_DEFAULTS = {"act": 1, "bias": 1, "residual": 0, "state": 0}


def causal_conv1d(x, weight, bias=None, residual=None, initial_state=None, output_final_state=False,
                  activation=None, cu_seqlens=None, config=None):
    """Forward ``(y [B,T,D], final_state [N,D,W-1] | None)``; ``config`` overrides SPEC tunables.

    Raises ValueError on shapes or options the kernels do not support (no silent fallback)."""
    cfg = resolve(SPEC.config(config))
    check_inputs(x, weight, bias, residual, initial_state, activation, cu_seqlens)
    return causal_conv1d_fwd(x, weight, bias, residual, initial_state, output_final_state, activation,
                             cu_seqlens, **fwd_options(cfg))


def fwd_options(cfg: dict) -> dict:
    """``causal_conv1d_fwd`` keyword options from resolved tunables."""
    return {"BT": cfg["BT"], "BD": cfg["BD"], "taps": cfg["TAPS"] - 1, "ahead": cfg["AHEAD"],
            "resident_grid": cfg["FWD_GRID"] == 2, "silu": cfg["SILU"], "edges": cfg["EDGES"],
            "edge_bd": cfg["BD_EDGE"], "edge_bt": cfg["BT_EDGE"]}


def resolve(config: dict, backend: str | None = None) -> dict:
    """Tunables with every 0 (auto) replaced by the choice for ``backend`` (default: the current one)."""
    if backend is None:
        from ascendopt.device import backends

        backend = backends.current().name
    key = (backend, *config.items())
    hit = _resolved.get(key)
    if hit is None:  # memoized: this runs on every call (host time, see causal_conv1d_fwd)
        auto = _AUTO["cuda" if backend == "cuda" else "other"]
        hit = {k: (auto[k] if v == 0 and k in auto else v) for k, v in config.items()}
        if "BT_EDGE" in hit:  # auto (0) and values above BT: the forward tile (powers of two: it divides BT)
            hit["BT_EDGE"] = min(hit["BT_EDGE"] or hit["BT"], hit["BT"])
        if not hit.get("BD_EDGE", 1):  # auto: follows the edge tile
            hit["BD_EDGE"] = masked_bd(hit.get("BT_EDGE", hit["BT"]), hit["BD"])
        _resolved[key] = hit
    return dict(hit)


_resolved: dict = {}


def check_inputs(x, weight, bias=None, residual=None, initial_state=None, activation=None, cu_seqlens=None):
    """ValueError naming the first argument whose shape, dtype or value the kernels do not support."""
    import torch

    if activation not in (None, "silu"):
        raise ValueError(f"activation={activation!r}: supported are None and 'silu'")
    if x.dim() != 3 or weight.dim() != 2 or weight.shape[0] != x.shape[2]:
        raise ValueError(f"x {tuple(x.shape)}, weight {tuple(weight.shape)}: expected [B,T,D] and [D,W]")
    D, W = weight.shape
    if not 2 <= W <= 4:
        raise ValueError(f"weight width W={W}: the kernels unroll 2..4 taps")
    if bias is not None and tuple(bias.shape) != (D,):
        raise ValueError(f"bias {tuple(bias.shape)}: expected [{D}]")
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"residual {tuple(residual.shape)}: expected the shape of x {tuple(x.shape)}")
    n = x.shape[0]
    if cu_seqlens is not None:
        if x.shape[0] != 1 or cu_seqlens.dim() != 1 or cu_seqlens.dtype not in (torch.int32, torch.int64):
            raise ValueError("varlen: x must be [1,T,D] and cu_seqlens a 1-D int32/int64 tensor")
        n = cu_seqlens.numel() - 1
    if initial_state is not None and tuple(initial_state.shape) != (n, D, W - 1):
        raise ValueError(f"initial_state {tuple(initial_state.shape)}: expected [{n}, {D}, {W - 1}]")


def causal_conv1d_forward_reference(x, weight, bias=None, residual=None, initial_state=None, activation=None,
                                    cu_seqlens=None):
    """Plain-torch forward of the oracle: ``(y [B,T,D], final_state [N,D,W-1])`` via ``F.conv1d(groups=D)``
    on the sequence left-padded with its initial state (zeros without one). Differentiable (the oracle
    ``causal_conv1d_reference`` takes its gradients through autograd); computes in the inputs' dtype."""
    import torch
    import torch.nn.functional as F

    B, _T, D = x.shape
    W = weight.shape[1]
    if cu_seqlens is None:
        seqs = [(b, x[b]) for b in range(B)]
    else:
        cu = cu_seqlens.tolist()
        seqs = [(n, x[0, cu[n]:cu[n + 1]]) for n in range(len(cu) - 1)]
    ys, states = [], []
    for n, xs in seqs:
        left = initial_state[n] if initial_state is not None else xs.new_zeros(D, W - 1)
        full = torch.cat([left, xs.t()], dim=1)  # [D, W-1+L]
        if xs.shape[0]:
            z = F.conv1d(full[None], weight[:, None, :], bias, groups=D)[0].t()  # [L, D]
        else:  # an empty sequence: conv1d rejects inputs shorter than the kernel
            z = xs * 0
        ys.append(F.silu(z) if activation == "silu" else z)
        states.append(full[:, full.shape[1] - (W - 1):])
    y = torch.stack(ys) if cu_seqlens is None else torch.cat(ys)[None]
    if residual is not None:
        y = y + residual
    return y, torch.stack(states)


# -- spec ------------------------------------------------------------------------------------


def _flags(dims) -> dict[str, int]:
    return {k: int(dims.get(k, v)) for k, v in _FLAG_DEFAULTS.items()}


def _extent(dims) -> tuple[int, int, int]:
    """(B, T, N): packed batch, packed length and number of sequences."""
    if "seqlens" in dims:
        return 1, sum(dims["seqlens"]), len(dims["seqlens"])
    return dims["B"], dims["T"], dims["B"]


def _make_inputs(dims, dtype: str, device, seed: int = 0) -> dict:
    import torch

    tdt = torch_dtype(dtype)
    gen = torch.Generator().manual_seed(seed)
    B, T, N = _extent(dims)
    D, W = dims["D"], dims["W"]
    f = _flags(dims)

    def rand(*shape, scale=1.0):
        return (torch.randn(shape, generator=gen) * scale).to(device, tdt)

    inputs = {"x": rand(B, T, D), "weight": rand(D, W, scale=W ** -0.5),
              "activation": "silu" if f["act"] else None, "dy": rand(B, T, D)}
    if f["bias"]:
        inputs["bias"] = rand(D, scale=0.5)
    if f["residual"]:
        inputs["residual"] = rand(B, T, D)
    if f["state"]:
        inputs["initial_state"] = rand(N, D, W - 1)
        inputs["dfinal_state"] = rand(N, D, W - 1)
    if "seqlens" in dims:
        cu = [0]
        for length in dims["seqlens"]:
            cu.append(cu[-1] + length)
        inputs["cu_seqlens"] = torch.tensor(cu, dtype=torch.int32, device=device)
    return inputs


def _run(inputs: dict, config: dict, mode: str) -> dict:
    config = resolve(config)
    x, weight = inputs["x"], inputs["weight"]
    bias, residual, h0 = inputs.get("bias"), inputs.get("residual"), inputs.get("initial_state")
    act, cu = inputs.get("activation"), inputs.get("cu_seqlens")
    y, ht = causal_conv1d_fwd(x, weight, bias, residual, h0, h0 is not None, act, cu, **fwd_options(config))
    out = {"y": y}
    if h0 is not None:
        out["final_state"] = ht
    if mode == "fwdbwd":
        dht = inputs.get("dfinal_state")
        dx, dw, db, dh0 = causal_conv1d_bwd(x, inputs["dy"], weight, bias, h0, dht, act, cu,
                                            BT=config["BT_BWD"], BD=config["BD_BWD"], taps=config["TAPS"] - 1,
                                            resident_grid=config["BWD_GRID"] == 2)
        out.update(dx=dx, dweight=dw)
        if bias is not None:
            out["dbias"] = db
        if residual is not None:
            out["dresidual"] = inputs["dy"]  # y = ... + residual: the gradient is dy itself, no copy
        if h0 is not None:
            out["dinitial_state"] = dh0
    return out


def causal_conv1d_reference(inputs: dict, mode: str) -> dict:
    """The oracle on the given tensors (the gate passes fp32 copies): ``y``, ``final_state`` with a state,
    and for ``fwdbwd`` the gradient ``d<input>`` of every tensor input, through autograd."""
    import torch

    names = [k for k in ("x", "weight", "bias", "residual", "initial_state") if k in inputs]
    leaves = {k: inputs[k].detach().requires_grad_(mode == "fwdbwd") for k in names}
    y, ht = causal_conv1d_forward_reference(leaves["x"], leaves["weight"], leaves.get("bias"), leaves.get("residual"),
                                            leaves.get("initial_state"), inputs.get("activation"),
                                            inputs.get("cu_seqlens"))
    has_state = "initial_state" in inputs
    out = {"y": y.detach()}
    if has_state:
        out["final_state"] = ht.detach()
    if mode == "fwdbwd":
        outs, grads = [y], [inputs["dy"].to(y.dtype)]
        if has_state:
            outs.append(ht)
            grads.append(inputs["dfinal_state"].to(ht.dtype))
        got = torch.autograd.grad(outs, [leaves[k] for k in names], grads)
        out.update({f"d{k}": g for k, g in zip(names, got, strict=True)})
    return out


def _ub_model(dims, config: dict, dtype: str) -> list[UBStage]:
    """Live sets per stage; auto tunables resolve as on the current backend. Tail tiles use the tile path
    (the forward's take the row path with ``EDGES`` 2, 3, 6, 7 or 8)."""
    try:
        cfg = resolve(config)
    except Exception:  # noqa: BLE001 - no usable backend: model the Ascend (non-cuda) choices
        cfg = resolve(config, "npu")
    fwd, bwd = {"BT": cfg["BT"], "BD": cfg["BD"]}, {"BT": cfg["BT_BWD"], "BD": cfg["BD_BWD"]}
    fwd_tail = {"BT": cfg["BT_EDGE"], "BD": cfg["BD_EDGE"]}
    bwd_tail = {"BT": cfg["BT_BWD"], "BD": masked_bd(cfg["BT_BWD"], cfg["BD_BWD"])}
    stages = [UBStage("fwd_tail", fwd_tail, "fp32", FWD_MEM_MULT, UB_MARGIN),
              UBStage("bwd_tail", bwd_tail, "fp32", BWD_MEM_MULT, UB_MARGIN)]
    if cfg["TAPS"] == TAPS_TILES:
        stages = [UBStage("fwd", fwd, "fp32", FWD_MEM_MULT, UB_MARGIN),
                  UBStage("bwd", bwd, "fp32", BWD_MEM_MULT, UB_MARGIN)]
    elif cfg["TAPS"] == TAPS_GATHER:
        stages += [UBStage("fwd_bulk_gather", fwd, "fp32", FWD_GATHER_MULT, UB_MARGIN),
                   UBStage("bwd_bulk_gather", bwd, "fp32", BWD_GATHER_MULT, UB_MARGIN)]
    else:
        # AHEAD = 2 keeps one more 4-row block live (in the input dtype; counted as fp32)
        fwd_rows_mult = FWD_ROWS_MULT + 4 * (cfg["AHEAD"] - 1)
        if cfg["EDGES"] in (2, 3, 6, 7, 8):  # the forward's edges run on the row path too: no forward tile stage
            stages = [st for st in stages if st.stage != "fwd_tail"]
        stages += [UBStage("fwd_bulk_rows", {"BD": cfg["BD"]}, "fp32", fwd_rows_mult, UB_MARGIN),
                   UBStage("bwd_bulk_rows", {"BD": cfg["BD_BWD"]}, "fp32", BWD_ROWS_MULT, UB_MARGIN)]
    return stages + [UBStage("dw_finalize", {"BS": 32, "BD": 64}, "fp32", FIN_MEM_MULT, UB_MARGIN)]


def _cost(dims, dtype: str, mode: str) -> Cost:
    B, T, N = _extent(dims)
    D, W = dims["D"], dims["W"]
    f = _flags(dims)
    b = dtype_bytes(dtype)
    n = B * T * D
    state = N * D * (W - 1) * b if f["state"] else 0
    params = (D * W + D * f["bias"]) * b
    # fwd: x in, y out, residual in, weight/bias in, initial state in, final state out
    fwd_bytes = 2 * n * b + f["residual"] * n * b + params + 2 * state
    fwd_flops = 2 * W * n + f["bias"] * n + 4 * f["act"] * n + f["residual"] * n
    if mode == "fwd":
        return Cost(fwd_bytes, fwd_flops)
    # bwd: x and dy in, dx out, dweight/dbias out, dfinal_state in, dinitial_state out (dresidual is dy)
    bwd_bytes = 3 * n * b + params + 2 * state
    # dx and dweight 2W each; with silu z is recomputed (2W) and act'(z) costs ~6 per element
    bwd_flops = 4 * W * n + f["act"] * (2 * W + 6) * n + f["bias"] * n
    return Cost(fwd_bytes + bwd_bytes, fwd_flops + bwd_flops)


def _supports(dims, dtype: str, mode: str) -> str | None:
    for key in ("D", "W"):
        if key not in dims:
            return f"missing dimension {key} (give B, T, D, W or seqlens, D, W)"
    if "seqlens" in dims:
        if dims.get("B", 1) != 1:
            return "varlen packs all sequences into B=1: drop B or set B=1"
        if any(length < 0 for length in dims["seqlens"]):
            return "seqlens must be >= 0"
        longest = max(dims["seqlens"], default=0)
    else:
        if "B" not in dims or "T" not in dims:
            return "missing dimension B or T (give B, T, D, W or seqlens, D, W)"
        if dims["B"] < 1 or dims["T"] < 1:
            return "B and T must be >= 1"
        longest = dims["T"]
    if not 2 <= dims["W"] <= 4:
        return f"W={dims['W']}: the kernels unroll 2..4 taps (the short-convolution range of Mamba/DeltaNet)"
    if dims["D"] < 1:
        return "D must be >= 1"
    if longest >= 2**31 - 1024:
        return f"sequence length {longest}: time indices inside a sequence are int32 (limit 2^31 - 1024)"
    for key, value in _flags(dims).items():
        if value not in (0, 1):
            return f"{key}={value}: feature flags are 0 or 1"
    return None


def _peer(inputs: dict, mode: str) -> dict:
    """fla-core 0.6.0's Triton causal_conv1d on the same inputs (H200 comparison).

    fla keeps W states ``[N,D,W]`` (slot 0 unused by the convolution): ours are padded with a zero
    column on the left and the outputs sliced back to ``[N,D,W-1]``.
    """
    import torch
    import torch.nn.functional as F

    try:
        from fla.modules.causal_conv1d import causal_conv1d as fla_conv
    except ImportError:  # fla-core < 0.6 kept it in fla.modules.convolution
        from fla.modules.convolution import causal_conv1d as fla_conv

    grad = mode == "fwdbwd"
    names = [k for k in ("x", "weight", "bias", "residual") if k in inputs]
    leaves = {k: inputs[k].detach().requires_grad_(grad) for k in names}
    h0 = inputs.get("initial_state")
    if h0 is not None:
        leaves["initial_state"] = F.pad(h0.detach(), (1, 0)).requires_grad_(grad)
    with torch.set_grad_enabled(grad):
        y, ht = fla_conv(leaves["x"], leaves["weight"], leaves.get("bias"), leaves.get("residual"),
                         leaves.get("initial_state"), output_final_state=h0 is not None,
                         activation=inputs.get("activation"), cu_seqlens=inputs.get("cu_seqlens"))
    out = {"y": y.detach()}
    if h0 is not None:
        out["final_state"] = ht.detach()[..., 1:]
    if grad:
        outs, grads = [y], [inputs["dy"]]
        if h0 is not None:
            outs.append(ht)
            grads.append(F.pad(inputs["dfinal_state"], (1, 0)))
        keys = list(leaves)
        got = torch.autograd.grad(outs, [leaves[k] for k in keys], grads)
        out.update({f"d{k}": g for k, g in zip(keys, got, strict=True)})
        if h0 is not None:
            out["dinitial_state"] = out["dinitial_state"][..., 1:]
    return out


_TILE_DOC = "0 = auto, else a power of two: {what}; the UB model (ub_model) must fit " + f"{UB_MARGIN:.0%} of UB"

SPEC = KernelSpec(
    name="causal_conv1d",
    description="depthwise causal conv1d (W 2..4), bias, silu, residual, states, varlen; fwd + bwd "
                "(dx, dweight, dbias, dinitial_state); 1D vector-core grid, constexpr bulk/tail split",
    bound="vector",
    modes=("fwd", "fwdbwd"),
    dtypes=("bf16", "fp32"),
    shapes={
        "tiny": ShapePreset("tiny", {"B": 2, "T": 150, "D": 40, "W": 4, "act": 1, "bias": 1, "residual": 1,
                                     "state": 1},
                            "CPU CI: every feature on, bulk + tail tiles, D not a tile multiple"),
        "tiny_varlen": ShapePreset("tiny_varlen", {"seqlens": (37, 0, 80, 2, 45), "D": 24, "W": 3, "act": 1,
                                                   "bias": 1, "residual": 0, "state": 1},
                                   "CPU CI: varlen with an empty and a shorter-than-W sequence"),
        "realistic": ShapePreset("realistic", {"B": 4, "T": 4096, "D": 4096, "W": 4, "act": 1, "bias": 1},
                                 "B4_T4096_D4096_W4: a DeltaNet short convolution (silu + bias)"),
        "varlen": ShapePreset("varlen", {"seqlens": (2048, 1000, 4096, 37, 6000, 3203), "D": 4096, "W": 4,
                                         "act": 1, "bias": 1},
                              "six packed sequences, 16384 tokens, D4096 W4"),
        "states": ShapePreset("states", {"B": 4, "T": 4096, "D": 4096, "W": 4, "act": 1, "bias": 1,
                                         "residual": 1, "state": 1},
                              "B4_T4096_D4096_W4 with residual, initial and final state"),
    },
    tunables={
        # 0 = auto (_AUTO): on cuda the row path with 64x512 / 32x512 tiles, elsewhere the tile path with
        # 32x128 tiles, which fit the UB model in both directions (fwd 80 KiB, bwd 144 KiB of a 167 KiB
        # budget on 910B) and compile for sm_90 without spills.
        "BT": Tunable("BT", 0, (0, 8, 16, 32, 64, 128, 256), _TILE_DOC.format(what="forward time tile")),
        "BD": Tunable("BD", 0, (0, 16, 32, 64, 128, 256, 512, 1024),
                      _TILE_DOC.format(what="forward channel tile")),
        "BT_BWD": Tunable("BT_BWD", 0, (0, 8, 16, 32, 64, 128), _TILE_DOC.format(what="backward time tile")),
        "BD_BWD": Tunable("BD_BWD", 0, (0, 16, 32, 64, 128, 256, 512, 1024),
                          _TILE_DOC.format(what="backward channel tile")),
        "TAPS": Tunable("TAPS", 0, (0, 1, 2, 3),
                        "how bulk tiles form the W taps: 0 = auto (3 on cuda, 1 elsewhere), 1 = W shifted "
                        "block-pointer tile loads (Ascend's 'load inside the static_range'), 2 = one tile "
                        "load + register shifts with tl.gather, 3 = stream the tile row by row with the "
                        "previous rows in registers"),
        "AHEAD": Tunable("AHEAD", 0, (0, 1, 2),
                         "row path (TAPS=3) forward: 4-row blocks loaded ahead of the one computing; 0 = "
                         "auto (1); 2 carries them unconverted so their loads stay in flight an iteration"),
        "FWD_GRID": Tunable("FWD_GRID", 0, (0, 1, 2),
                            "forward programs: 0 = auto (1), 1 = one per task up to the 1D core grid's cap, "
                            "2 = as many as the SMs hold at once (kernels._lib.resident; CUDA only, else as 1)"),
        "BWD_GRID": Tunable("BWD_GRID", 0, (0, 1, 2),
                            "backward bulk programs: 0 = auto (2 on cuda, 1 elsewhere), 1 = up to 4 per core, "
                            "2 = up to the programs an SM holds at once (CUDA, known before the first launch; "
                            "else as 1). dweight partials follow the grid: results change within the "
                            "tolerances, deterministic for a device"),
        "SILU": Tunable("SILU", 0, (0, 1, 2),
                        "row path (TAPS=3) forward silu: 0 = auto (2 on cuda), 1 = z * sigmoid(z), 2 = z / (1 + "
                        "exp2(-z log2 e)): fewer instructions per element on sm_90, rounding may differ"),
        "EDGES": Tunable("EDGES", 0, (0, 1, 2, 3, 4, 5, 6, 7, 8),
                         "row path (TAPS=3) forward, tiles whose halo leaves their sequence (its first tile, a "
                         "partial last tile): 1 = a second launch on the masked 2-D tile path, 2 = one launch "
                         "for all tiles with every row masked to its sequence, 3 = bulk tiles unmasked, then "
                         "the edge tiles as masked rows, 4 = as 1 with the edge launch on a side stream "
                         "beside the bulk launch (cuda; elsewhere as 1), 5 = as 4 with the bulk tiles starting "
                         "W-1 rows into each sequence, so its head edge is W-1 rows, and the edges as pieces of "
                         "at most BT_EDGE rows, 6 = as 3 with the edge launch on a side stream (cuda; elsewhere "
                         "as 3), 7 = as 5 with the pieces as masked rows, 8 = as 7 with each sequence's last "
                         "bulk tile shifted back to end at its end (rows it shares with the tile before it are "
                         "written twice, same values), so only its first W-1 rows are a piece; 0 = auto (7 on "
                         "cuda, 1 elsewhere)"),
        "BD_EDGE": Tunable("BD_EDGE", 0, (0, 16, 32, 64, 128, 256),
                           "forward channel tile of the edge tiles on the masked tile path; 0 = auto (the "
                           "largest with BT_EDGE x BD_EDGE <= 4096, at most BD)"),
        "BT_EDGE": Tunable("BT_EDGE", 0, (0, 4, 8, 16, 32, 64, 128, 256),
                           "forward time tile of the edge tiles (EDGES 1 and 3-8; on the row path, EDGES 3, "
                           "6, 7 and 8, a multiple of its 4-row blocks): "
                           "the forward tiles outside the bulk launch cut into BT / BT_EDGE pieces, more and "
                           "shorter programs; 0 = auto (8 on cuda, BT elsewhere), values above BT act as BT"),
    },
    make_inputs=_make_inputs,
    run=_run,
    reference=causal_conv1d_reference,
    ub_model=_ub_model,
    cost=_cost,
    supports=_supports,
    kernel_names=("_causal_conv1d_fwd_kernel", "_causal_conv1d_bwd_kernel"),
    tolerances={"fp32": 1e-5, "bf16": 1e-2},
    extras={"peer": _peer,
            "peer_name": "fla.modules.causal_conv1d.causal_conv1d (fla-core 0.6.0, backend triton)",
            "outputs": {"fwd": ("y", "final_state"),
                        "fwdbwd": ("y", "final_state", "dx", "dweight", "dbias", "dresidual",
                                   "dinitial_state")},
            "all_kernel_names": ("_causal_conv1d_fwd_kernel", "_causal_conv1d_state_kernel",
                                 "_causal_conv1d_bwd_kernel", "_causal_conv1d_dw_finalize_kernel")},
)
