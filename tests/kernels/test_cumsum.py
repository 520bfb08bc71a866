"""chunk_local_cumsum under the interpreter: fixed length, varlen vs per-sequence runs, options, layouts."""

import pytest
import torch

from _numerics import rel_rms
from ascendopt.errors import UsageError
from ascendopt.kernels import chunk_local_cumsum as cumsum_module
from ascendopt.kernels import get
from ascendopt.kernels._lib.common import nan_poisoning
from ascendopt.kernels.chunk_local_cumsum import chunk_local_cumsum, chunk_local_cumsum_reference


def _gate(shape, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.nn.functional.logsigmoid(torch.randn(shape, generator=gen) + 1.0).to(dtype)


def _reference(g, chunk, reverse=False, scale=None, cu_seqlens=None):
    inputs = {"g": g, "chunk_size": chunk, "reverse": reverse, "scale": scale, "cu_seqlens": cu_seqlens}
    return chunk_local_cumsum_reference(inputs)["o"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape,chunk", [((2, 150, 3), 64), ((2, 70, 2, 8), 16), ((1, 256, 4), 128), ((2, 64, 1), 32)])
@pytest.mark.parametrize("t_contig", [0, 1])
def test_fixed_length_matches_oracle(dtype, shape, chunk, t_contig):
    # 150 and 70 leave tail chunks; 256 / 128 and 64 / 32 have none (empty tail: bulk launch only).
    g = _gate(shape, dtype)
    with nan_poisoning():
        o = chunk_local_cumsum(g, chunk, config={"t_contig": t_contig})
    assert o.shape == g.shape and o.dtype == torch.float32
    assert not torch.isnan(o).any()
    assert rel_rms(o, _reference(g, chunk)) < 1e-6


@pytest.mark.parametrize("reverse,scale", [(True, None), (False, 0.5), (True, -2.0)])
def test_reverse_and_scale(reverse, scale):
    g = _gate((2, 100, 3, 4))
    o = chunk_local_cumsum(g, 32, reverse=reverse, scale=scale, config={"block_c": 4})
    assert rel_rms(o, _reference(g, 32, reverse, scale)) < 1e-6
    if reverse:  # a suffix sum's first element in a chunk is the chunk total
        torch.testing.assert_close(o[:, 0], g[:, :32].sum(1) * (scale or 1.0), rtol=1e-5, atol=1e-6)


def test_chunks_restart_at_each_boundary():
    g = torch.ones(1, 40, 1)
    o = chunk_local_cumsum(g, 16)
    expected = torch.cat([torch.arange(1.0, 17), torch.arange(1.0, 17), torch.arange(1.0, 9)])
    torch.testing.assert_close(o.view(-1), expected)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("shape_tail,reverse", [((3,), False), ((2, 8), True)])
@pytest.mark.parametrize("in_kernel_index", [True, False])
def test_varlen_equals_per_sequence_fixed_length_runs(index_dtype, shape_tail, reverse, in_kernel_index,
                                                      monkeypatch):
    # Several lengths: non-aligned (70, 33, 1), empty (0) and chunk-aligned (64) sequences. The chunk
    # index is built in-kernel for few sequences, else searched in host-computed chunk offsets.
    if not in_kernel_index:
        monkeypatch.setattr(cumsum_module, "MAX_IN_KERNEL_SEQS", 0)
    lengths = [70, 0, 33, 64, 1]
    cu = torch.tensor([0, 70, 70, 103, 167, 168], dtype=index_dtype)
    g = _gate((1, sum(lengths), *shape_tail), seed=1)
    with nan_poisoning():
        packed = chunk_local_cumsum(g, 32, reverse=reverse, cu_seqlens=cu, config={"block_c": 2})
    assert not torch.isnan(packed).any()
    for start, end in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True):
        if end == start:
            continue
        alone = chunk_local_cumsum(g[:, start:end].contiguous(), 32, reverse=reverse)
        torch.testing.assert_close(packed[:, start:end], alone, rtol=0, atol=0)
    assert rel_rms(packed, _reference(g, 32, reverse, cu_seqlens=cu)) < 1e-6


def test_varlen_t_contig_layout_matches():
    cu = torch.tensor([0, 17, 50, 120], dtype=torch.int64)
    g = _gate((1, 120, 5), seed=2)
    a = chunk_local_cumsum(g, 16, cu_seqlens=cu, config={"t_contig": 1})
    b = chunk_local_cumsum(g, 16, cu_seqlens=cu, config={"t_contig": 0})
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert rel_rms(a, _reference(g, 16, cu_seqlens=cu)) < 1e-6


def test_gate_check_passes_on_the_tiny_presets():
    from ascendopt.judge.correctness import check_kernel

    spec = get("chunk_local_cumsum")
    for preset in ("tiny", "tiny_varlen"):
        for dtype in spec.dtypes:
            reports = check_kernel(spec, spec.shape(preset).dims, dtype, "fwd", None)
            assert [r.name for r in reports] == ["o"]
            assert all(r.passed for r in reports), [r.line() for r in reports]


def test_bad_inputs_raise_usage_errors():
    g = _gate((2, 10, 3))
    with pytest.raises(UsageError, match="chunk_size"):
        chunk_local_cumsum(g, 48)
    with pytest.raises(UsageError, match="B == 1"):
        chunk_local_cumsum(g, 16, cu_seqlens=torch.tensor([0, 10], dtype=torch.int32))
    with pytest.raises(UsageError, match="int32 or int64"):
        chunk_local_cumsum(g[:1], 16, cu_seqlens=torch.tensor([0.0, 10.0]))
    with pytest.raises(UsageError, match=r"\[B, T, H\]"):
        chunk_local_cumsum(torch.randn(4, 4), 16)
    assert "forward only" in get("chunk_local_cumsum").supports({"B": 1, "T": 8, "H": 2}, "fp32", "fwdbwd")
