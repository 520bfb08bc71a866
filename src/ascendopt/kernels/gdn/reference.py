"""fp32 torch oracles for the gated delta rule forward: the recurrence token by token, and each chunk stage.

Recurrence (per value head, state ``S`` of shape [K, V], ``h = hv // (HV // H)`` the query/key head):

    S_t = exp(g_t) S_{t-1} + k_t (beta_t (v_t - S_{t-1}' k_t))'      with S_{t-1}' = exp(g_t) S_{t-1}
    o_t = scale * S_t' q_t

Chunked form (chunk of BT tokens, ``gc`` the chunk-local cumsum of ``g``; Yang et al., "Gated Delta
Networks", arXiv 2412.06464, with the WY representation of the chunk's Householder-like products):

    A   = strict_lower(beta_i k_i.k_j exp(gc_i - gc_j))            (stage kkt)
    Ai  = (I + A)^-1                                                 (stage solve_tril)
    w   = Ai (beta exp(gc) k),  u = Ai (beta v)                      (stage wy)
    v'  = u - w h_c,  h_{c+1} = exp(gc_last) h_c + (exp(gc_last - gc) k)' v'   (stage state)
    o   = scale (exp(gc) q h_c + lower(q k' exp(gc_i - gc_j)) v')   (stage output)

Inputs use the public layout (``[B, T, heads, dim]``, varlen packed in B=1 with ``cu_seqlens``);
everything is computed in fp32 and returned in fp32. The stage functions take ``lowp`` (a torch
dtype): then every operand the kernels round to that dtype before a ``tl.dot`` is rounded here too,
which makes them "torch's own low-precision computation" of the chunked algorithm, the second
limit of the correctness gate (``ascendopt.judge.correctness``) for bf16 runs.
"""

from __future__ import annotations

from itertools import pairwise

from ascendopt.kernels.gdn.layout import CHUNK


def _bounds(batch: int, seq_len: int, cu_seqlens) -> list[tuple[int, int, int]]:
    """(batch row, start, end) of every sequence."""
    if cu_seqlens is None:
        return [(b, 0, seq_len) for b in range(batch)]
    cu = [int(x) for x in cu_seqlens.tolist()]
    return [(0, s, e) for s, e in pairwise(cu)]


def _round(x, lowp):
    """``x`` rounded to ``lowp`` and back to fp32 (no-op for ``lowp=None``)."""
    return x if lowp is None else x.to(lowp).float()


def lowp_of(x):
    """The low-precision dtype of an input tensor, or None for fp32."""
    import torch

    return None if x.dtype == torch.float32 else x.dtype


def _expand_heads(x, heads: int):
    """[..., H, D] -> [..., HV, D]: value head hv reads query/key head hv // (HV // H)."""
    return x.repeat_interleave(heads // x.shape[-2], dim=-2)


def chunk_gated_delta_rule_reference(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens=None):
    """The oracle: the recurrence token by token in fp32.

    q, k [B,T,H,K]; v [B,T,HV,V]; g (log decay), beta [B,T,HV]; initial_state [N,HV,K,V] or None.
    Returns ``o`` [B,T,HV,V] and the final state [N,HV,K,V], both fp32.
    """
    import torch

    B, T, _, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    scale = K ** -0.5 if scale is None else scale
    q, k = _expand_heads(q.float(), HV), _expand_heads(k.float(), HV)
    v, g, beta = v.float(), g.float(), beta.float()
    bounds = _bounds(B, T, cu_seqlens)
    o = torch.zeros(B, T, HV, V, dtype=torch.float32, device=q.device)
    final = torch.zeros(len(bounds), HV, K, V, dtype=torch.float32, device=q.device)
    for n, (b, start, end) in enumerate(bounds):
        S = torch.zeros(HV, K, V, device=q.device) if initial_state is None else initial_state[n].float().clone()
        for t in range(start, end):
            S = S * g[b, t].exp()[:, None, None]
            err = v[b, t] - torch.einsum("hk,hkv->hv", k[b, t], S)
            S = S + torch.einsum("hk,hv->hkv", k[b, t], beta[b, t, :, None] * err)
            o[b, t] = torch.einsum("hk,hkv->hv", q[b, t] * scale, S)
        final[n] = S
    return o, final


# -- chunk stages -----------------------------------------------------------------------------------

def _chunks(x, edge: bool = False):
    """[L, ...] -> [NC, BT, ...], the tail padded with zeros (or with its last row: a gate cumsum)."""
    import torch

    length = x.shape[0]
    pad = -length % CHUNK
    if pad:
        fill = x[-1:].expand(pad, *x.shape[1:]) if edge else x.new_zeros(pad, *x.shape[1:])
        x = torch.cat([x, fill])
    return x.reshape(-1, CHUNK, *x.shape[1:])


def _unchunk(x, length: int):
    return x.reshape(-1, *x.shape[2:])[:length]


def gate_cumsum_reference(g, cu_seqlens=None):
    """Chunk-local cumulative sum of g [B,T,HV] within each 64-token chunk of each sequence (fp32)."""
    import torch

    out = torch.zeros_like(g, dtype=torch.float32)
    for b, s, e in _bounds(g.shape[0], g.shape[1], cu_seqlens):
        if e > s:
            out[b, s:e] = _unchunk(_chunks(g[b, s:e].float()).cumsum(1), e - s)
    return out


def kkt_reference(k, beta, gc, cu_seqlens=None, lowp=None):
    """A [B,T,HV,BT] fp32: row i of a chunk holds beta_i k_i.k_j exp(gc_i - gc_j) for j < i, else 0."""
    import torch

    HV = beta.shape[-1]
    out = torch.zeros(*beta.shape, CHUNK, dtype=torch.float32, device=k.device)
    strict = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=k.device).tril(-1)
    for b, s, e in _bounds(k.shape[0], k.shape[1], cu_seqlens):
        if e == s:
            continue
        kc = _chunks(_expand_heads(k[b, s:e].float(), HV))  # [NC, BT, HV, K]
        gcc = _chunks(gc[b, s:e].float(), edge=True)  # [NC, BT, HV]
        bc = _chunks(beta[b, s:e].float())
        dots = torch.einsum("nihk,njhk->nhij", _round(kc * bc[..., None], lowp), kc)
        decay = (gcc.transpose(1, 2)[..., :, None] - gcc.transpose(1, 2)[..., None, :]).masked_fill(~strict, 0).exp()
        A = (dots * decay).masked_fill(~strict, 0)
        out[b, s:e] = _unchunk(A.permute(0, 2, 1, 3), e - s)
    return out


def solve_tril_reference(A, cu_seqlens=None):
    """Ai [B,T,HV,BT] fp32: per chunk, (I + A)^-1 of the strictly lower triangular A."""
    import torch

    out = torch.zeros_like(A, dtype=torch.float32)
    eye = torch.eye(CHUNK, device=A.device)
    for b, s, e in _bounds(A.shape[0], A.shape[1], cu_seqlens):
        if e == s:
            continue
        Ac = _chunks(A[b, s:e].float()).transpose(1, 2)  # [NC, HV, BT, BT]
        inv = torch.linalg.solve_triangular(eye + Ac, eye.expand_as(Ac), upper=False, unitriangular=True)
        out[b, s:e] = _unchunk(inv.transpose(1, 2), e - s)
    return out


def wy_reference(k, v, beta, Ai, gc, cu_seqlens=None, lowp=None):
    """w = Ai (beta exp(gc) k) [B,T,HV,K] and u = Ai (beta v) [B,T,HV,V], fp32."""
    import torch

    HV = v.shape[2]
    w = torch.zeros(*v.shape[:3], k.shape[-1], dtype=torch.float32, device=k.device)
    u = torch.zeros_like(v, dtype=torch.float32)
    for b, s, e in _bounds(k.shape[0], k.shape[1], cu_seqlens):
        if e == s:
            continue
        Aic = _chunks(Ai[b, s:e].float())  # [NC, BT(i), HV, BT(j)]
        scale = beta[b, s:e].float() * gc[b, s:e].float().exp()
        kb = _chunks(_round(_expand_heads(k[b, s:e].float(), HV) * scale[..., None], lowp))
        vb = _chunks(_round(v[b, s:e].float() * beta[b, s:e].float()[..., None], lowp))
        w[b, s:e] = _unchunk(torch.einsum("nihj,njhk->nihk", Aic, kb), e - s)
        u[b, s:e] = _unchunk(torch.einsum("nihj,njhv->nihv", Aic, vb), e - s)
    return w, u


def state_reference(k, w, u, gc, initial_state=None, cu_seqlens=None, lowp=None):
    """The chunk-state recurrence.

    Returns h [NC_total, HV, K, V] (state entering each chunk, chunks numbered over all sequences in
    order), v_new [B,T,HV,V] = u - w h, and the final state [N,HV,K,V]; all fp32.
    """
    import torch

    HV, V = u.shape[2], u.shape[3]
    K = k.shape[-1]
    bounds = _bounds(k.shape[0], k.shape[1], cu_seqlens)
    states, v_new = [], torch.zeros_like(u, dtype=torch.float32)
    final = torch.zeros(len(bounds), HV, K, V, dtype=torch.float32, device=k.device)
    for n, (b, s, e) in enumerate(bounds):
        h = torch.zeros(HV, K, V, device=k.device) if initial_state is None else initial_state[n].float().clone()
        for c0 in range(s, e, CHUNK):
            c1 = min(c0 + CHUNK, e)
            states.append(h)
            kc = _expand_heads(k[b, c0:c1].float(), HV)  # [L, HV, K]
            gcc = gc[b, c0:c1].float()  # [L, HV]
            vn = u[b, c0:c1].float() - torch.einsum("lhk,hkv->lhv", w[b, c0:c1].float(), _round(h, lowp))
            v_new[b, c0:c1] = vn
            last = gcc[-1]
            h = h * last.exp()[:, None, None] + torch.einsum(
                "lhk,lhv->hkv", kc, _round(vn * (last[None] - gcc).exp()[..., None], lowp))
        final[n] = h
    h_all = torch.stack(states) if states else torch.zeros(0, HV, K, V, device=k.device)
    return h_all, v_new, final


def scores_reference(q, k, gc, cu_seqlens=None, lowp=None):
    """[B,T,HV,BT] fp32: row i of a chunk holds q_i.k_j exp(gc_i - gc_j) for j <= i, else 0 (the
    output's intra-chunk scores, unscaled), HV taken from gc."""
    import torch

    HV = gc.shape[2]
    out = torch.zeros(*gc.shape, CHUNK, dtype=torch.float32, device=q.device)
    causal = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=q.device).tril()
    for b, s, e in _bounds(q.shape[0], q.shape[1], cu_seqlens):
        if e == s:
            continue
        qc = _chunks(_expand_heads(_round(q[b, s:e].float(), lowp), HV))  # [NC, BT, HV, K]
        kc = _chunks(_expand_heads(_round(k[b, s:e].float(), lowp), HV))
        gt = _chunks(gc[b, s:e].float(), edge=True).transpose(1, 2)  # [NC, HV, BT]
        decay = (gt[..., :, None] - gt[..., None, :]).masked_fill(~causal, 0).exp()
        scores = (torch.einsum("nihk,njhk->nhij", qc, kc) * decay).masked_fill(~causal, 0)
        out[b, s:e] = _unchunk(scores.permute(0, 2, 1, 3), e - s)
    return out


def output_reference(q, k, v_new, h, gc, scale, cu_seqlens=None, lowp=None):
    """o [B,T,HV,V] fp32 = scale (exp(gc) q h_c + causal(q k' exp(gc_i - gc_j)) v_new) per chunk."""
    import torch

    HV = v_new.shape[2]
    o = torch.zeros_like(v_new, dtype=torch.float32)
    causal = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=q.device).tril()
    chunk = 0
    for b, s, e in _bounds(q.shape[0], q.shape[1], cu_seqlens):
        if e == s:
            continue
        qc = _chunks(_expand_heads(q[b, s:e].float(), HV))  # [NC, BT, HV, K]
        kc = _chunks(_expand_heads(k[b, s:e].float(), HV))
        vc = _chunks(v_new[b, s:e].float())
        gcc = _chunks(gc[b, s:e].float(), edge=True)
        hc = h[chunk:chunk + qc.shape[0]].float()  # [NC, HV, K, V]
        chunk += qc.shape[0]
        inter = torch.einsum("nihk,nhkv->nihv", qc * gcc.exp()[..., None], hc)
        gt = gcc.transpose(1, 2)
        decay = (gt[..., :, None] - gt[..., None, :]).masked_fill(~causal, 0).exp()
        scores = (torch.einsum("nihk,njhk->nhij", qc, kc) * decay).masked_fill(~causal, 0)
        intra = torch.einsum("nhij,njhv->nihv", _round(scores, lowp), vc)
        o[b, s:e] = _unchunk((inter + intra) * scale, e - s)
    return o


def solve_inputs_reference(base: dict):
    """(gc, Ai) from ``workload.make_base_inputs``' tensors: the gate cumsum and the kkt + solve stages."""
    cu = base.get("cu_seqlens")
    gc = gate_cumsum_reference(base["g"], cu)
    return gc, solve_tril_reference(kkt_reference(base["k"], base["beta"], gc, cu), cu)


def wy_inputs_reference(base: dict):
    """(gc, w, u) from ``workload.make_base_inputs``' tensors: the stages before the state recurrence."""
    gc, Ai = solve_inputs_reference(base)
    w, u = wy_reference(base["k"], base["v"], base["beta"], Ai, gc, base.get("cu_seqlens"))
    return gc, w, u


def chunked_reference(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens=None, lowp=None):
    """The chunked form composed from the stage references; equals the oracle up to fp32 rounding.

    With ``lowp`` the intermediates the forward stores in the input dtype (Ai, w, u, h, v_new) are
    rounded to it as well: torch's own low-precision computation of the same algorithm.
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    gc = gate_cumsum_reference(g, cu_seqlens)
    Ai = _round(solve_tril_reference(kkt_reference(k, beta, gc, cu_seqlens, lowp), cu_seqlens), lowp)
    w, u = (_round(x, lowp) for x in wy_reference(k, v, beta, Ai, gc, cu_seqlens, lowp))
    h, v_new, final = state_reference(k, w, u, gc, initial_state, cu_seqlens, lowp)
    o = output_reference(q, k, _round(v_new, lowp), _round(h, lowp), gc, scale, cu_seqlens, lowp)
    return o, final
