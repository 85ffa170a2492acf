# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The attention reference of the numerics tests, written from the semantic
contract in docs/FA/FADialect.md and sharing no code with the lowerings:

    S = scale * Q K^T per (b, h), query head h reading kv head h // (Hq/Hkv)
    S += additive mask;  S = -inf where the boolean mask, causality
    (top-left keeps k <= q, bottom-right keeps k <= q + Nk - Nq) or the key
    lengths (k < clamp(len, 0, Nk)) remove a key
    O = softmax(S) V, LSE = m + log(l); a row with no key left gives O = 0
    and LSE = -inf.

Test scripts import it with
    sys.path.insert(0, os.path.join(<test root>, "lib"))
"""

import hashlib

import numpy as np


def seed_of(name):
    """A per-case seed: failures reproduce, and every case differs."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


def save_attention_inputs(paths, q, k, v, lens, mask, with_lse,
                          block_q=None, block_kv=None):
    """Writes the .npy inputs of one attention case to `paths` and returns
    the command-line flags `fa-run attention` and `fa-emulate` share."""
    np.save(paths["q"], q)
    np.save(paths["k"], k)
    np.save(paths["v"], v)
    flags = ["--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
             "-o", paths["o"]]
    if with_lse:
        flags += ["--lse", paths["lse"]]
    if lens is not None:
        np.save(paths["lens"], lens)
        flags += ["--kv-lens", paths["lens"]]
    if mask is not None:
        np.save(paths["mask"], mask)
        flags += ["--mask", paths["mask"]]
    if block_q is not None:
        flags += ["--block-q", str(block_q)]
    if block_kv is not None:
        flags += ["--block-kv", str(block_kv)]
    return flags


def reference(q, k, v, scale, causal, lens, mask, dt, window=None,
              softcap=None, alibi=None, chunk=None, segments=None,
              q_offset=0, score_mod=None, mask_mod=None):
    """Attention computed naively in floating type `dt`. Returns (O, LSE,
    empty) with `empty` marking rows with no attended key.

    The score/mask modifiers follow the op description (FlashAttention 2's
    definitions); `off` = (Nk - Nq for bottom-right, else 0) + q_offset:
      window=(L, R): keep q + off - L <= k <= q + off + R, -1 = unbounded;
      softcap=c: s = c * tanh(s / c) on the scaled score;
      alibi=slopes [Hq] or [B, Hq]: s -= slope * |q + off - k|;
      chunk=C: keep floor((q + off) / C) == floor(k / C);
      segments=(qs [B, Nq], ks [B, Nk]): keep qs[b, q] == ks[b, k];
      score_mod(s, b, h, q, k) -> new scores, mask_mod(b, h, q, k) -> keep:
        numpy functions of broadcast index grids (the op's regions, with
        the indices of the op's operands, no offset).
    Order: scale, softcap, ALiBi, additive mask, score_mod; then removed
    keys."""
    q, k, v = q.astype(dt), k.astype(dt), v.astype(dt)
    B, Hq, Nq, _ = q.shape
    Nk = k.shape[2]
    s, _ = scores(q, k, scale, causal, lens, mask, dt, window, softcap,
                  alibi, chunk, segments, q_offset, score_mod, mask_mod)
    # Query head h reads kv head h // group.
    v = np.repeat(v, Hq // k.shape[1], axis=1)
    if Nk == 0:
        m = np.full((B, Hq, Nq, 1), -np.inf, dtype=dt)
    else:
        m = s.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(m[..., 0]) & (m[..., 0] < 0)
    m_safe = np.where(np.isfinite(m), m, dt(0))
    p = np.exp(s - m_safe)
    l = p.sum(axis=-1)
    o = np.einsum("bhqk,bhkd->bhqd", p, v)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(empty[..., None], dt(0), o / l[..., None])
        lse = np.where(empty, dt(-np.inf), m[..., 0] + np.log(l))
    return o.astype(dt), lse.astype(dt), empty


def scores(q, k, scale, causal, lens, mask, dt, window=None, softcap=None,
           alibi=None, chunk=None, segments=None, q_offset=0, score_mod=None,
           mask_mod=None):
    """The scores of the op description in type `dt`, [B, Hq, Nq, Nk], with
    removed keys at -inf, and the scaled products scale * Q K^T (before the
    modifiers; the softcap's derivative is taken there)."""
    q, k = q.astype(dt), k.astype(dt)
    B, Hq, Nq, _ = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    group = Hq // Hkv
    k = np.repeat(k, group, axis=1)
    if dt == np.float64:
        s = np.einsum("bhqd,bhkd->bhqk", q, k)
    else:
        # A naive kernel's dot product: one running sum over d in `dt`
        # (numpy's einsum would sum pairwise, more accurately than a kernel).
        s = np.zeros((B, Hq, Nq, Nk), dtype=dt)
        for d in range(q.shape[3]):
            s += q[:, :, :, d, None] * k[:, :, None, :, d]
    s = dt(scale) * s
    scaled = s
    qi = np.arange(Nq)[:, None]
    ki = np.arange(Nk)[None, :]
    off = (Nk - Nq if causal == "bottom-right" else 0) + q_offset
    pos = qi + off
    if softcap is not None:
        s = dt(softcap) * np.tanh(s / dt(softcap))
    if alibi is not None:
        sl = alibi.astype(dt)
        sl = sl[None, :] if sl.ndim == 1 else sl
        s = s - sl[:, :, None, None] * np.abs(pos - ki).astype(dt)[None, None]
    keep = np.ones((B, Hq, Nq, Nk), dtype=bool)
    if mask is not None:
        if mask.dtype == np.bool_:
            keep &= mask
        else:
            s = s + mask.astype(dt)
    grid = (np.arange(B)[:, None, None, None], np.arange(Hq)[None, :, None, None],
            np.arange(Nq)[None, None, :, None], np.arange(Nk)[None, None, None, :])
    if score_mod is not None:
        s = np.broadcast_to(score_mod(s, *grid), s.shape).astype(dt)
    if mask_mod is not None:
        keep &= np.broadcast_to(mask_mod(*grid), keep.shape)
    if causal == "top-left":
        keep &= ki <= qi + q_offset
    elif causal == "bottom-right":
        keep &= ki <= pos
    if window is not None:
        left, right = window
        if left >= 0:
            keep &= ki >= pos - left
        if right >= 0:
            keep &= ki <= pos + right
    if chunk is not None:
        keep &= (pos // chunk) == (ki // chunk)
    if segments is not None:
        qs, ks = segments
        keep &= (qs[:, None, :, None] == ks[:, None, None, :])
    if lens is not None:
        kv_end = np.clip(lens.astype(np.int64), 0, Nk)
        keep &= ki[None, None] < kv_end[:, None, None, None]
    return np.where(keep, s, dt(-np.inf)), scaled


def reference_backward(q, k, v, do, scale, causal, lens, mask, window=None,
                       softcap=None, alibi=None, chunk=None, segments=None,
                       round_operands=None):
    """The gradients (dQ, dK, dV) of sum(O * dO) for attention with these
    rules, in float64, from the contract (docs/FA/FADialect.md,
    fa.attention_backward): P = softmax of the scores (0 for removed keys
    and empty rows), dV = P^T dO, dP = dO V^T, Delta = rowsum(dO * O),
    dS = P (dP - Delta) (times 1 - tanh(s / c)^2 with a softcap, s the
    scaled product), dQ = scale dS K, dK = scale dS^T Q; GQA sums dK and dV
    over the query heads of a group. `round_operands` (a function of an
    array), when given, rounds P and dS where a tensor-core kernel rounds
    them: before they enter dV = P^T dO, dQ = dS K and dK = dS^T Q."""
    dt = np.float64
    q, k, v, do = (a.astype(dt) for a in (q, k, v, do))
    Hq, Hkv = q.shape[1], k.shape[1]
    group = Hq // Hkv
    o, lse, empty = reference(q, k, v, scale, causal, lens, mask, dt, window,
                              softcap, alibi, chunk, segments)
    s, scaled = scores(q, k, scale, causal, lens, mask, dt, window, softcap,
                       alibi, chunk, segments)
    lse_safe = np.where(empty, 0.0, lse)
    p = np.where(empty[..., None], 0.0, np.exp(s - lse_safe[..., None]))
    kr = np.repeat(k, group, axis=1)
    vr = np.repeat(v, group, axis=1)
    rnd = round_operands or (lambda x: x)
    dv = np.einsum("bhqk,bhqd->bhkd", rnd(p), do)
    dp = np.einsum("bhqd,bhkd->bhqk", do, vr)
    delta = (do * o).sum(axis=-1)
    ds = p * (dp - delta[..., None])
    if softcap is not None:
        ds = ds * (1.0 - np.tanh(scaled / softcap) ** 2)
    dq = scale * np.einsum("bhqk,bhkd->bhqd", rnd(ds), kr)
    dk = scale * np.einsum("bhqk,bhqd->bhkd", rnd(ds), q)
    B, _, Nk, D = k.shape

    def fold(g):
        # Sum the group's query heads into their kv head.
        return g.reshape(B, Hkv, group, Nk, g.shape[-1]).sum(axis=2)
    return dq, fold(dk), fold(dv)


def sorted_segments(rng, B, N, docs):
    """[B, N] int32 sorted segment ids with `docs` documents (some may be
    empty): a packed batch's document mask."""
    out = np.zeros((B, N), dtype=np.int32)
    for b in range(B):
        cuts = np.sort(rng.integers(0, N + 1, size=docs - 1))
        out[b] = np.searchsorted(cuts, np.arange(N), side="right")
    return out


def modifier_inputs(rng, B, Hq, Nq, Nk, alibi, segments):
    """The modifier operands of a test case, drawn from `rng`: ALiBi slopes
    in [0, 0.5) (`alibi` "h": [Hq], "bh": [B, Hq], None: none) and segment
    ids (`segments` "sorted": 4 documents per batch, some maybe empty;
    "random": ids in {0, 1, 2}; None: none). Returns a dict with the keys
    "alibi", "qs" and "ks" of those drawn."""
    mods = {}
    if alibi == "h":
        mods["alibi"] = rng.random(Hq, dtype=np.float32) * 0.5
    elif alibi == "bh":
        mods["alibi"] = rng.random((B, Hq), dtype=np.float32) * 0.5
    if segments == "sorted":
        mods["qs"] = sorted_segments(rng, B, Nq, 4)
        mods["ks"] = sorted_segments(rng, B, Nk, 4)
    elif segments == "random":
        mods["qs"] = rng.integers(0, 3, size=(B, Nq), dtype=np.int32)
        mods["ks"] = rng.integers(0, 3, size=(B, Nk), dtype=np.int32)
    return mods


def compare_outputs(tag, o, lse, ref_o, ref_l, empty, tol=2e-5):
    """Judges a kernel's O and LSE against the reference: relative
    Frobenius errors below `tol` on the rows with attended keys, the empty
    rows exactly O = 0 and LSE = -inf, no NaN. Prints one line; returns
    the failures (strings)."""
    full = ~empty

    def rel(x, ref):
        den = np.linalg.norm(ref)
        return np.linalg.norm(x - ref) / (den if den > 0 else 1.0)

    err_o, err_l = rel(o[full], ref_o[full]), rel(lse[full], ref_l[full])
    print(f"{tag}: O rel err {err_o:.2e}, LSE rel err {err_l:.2e}, "
          f"{int(empty.sum())} empty rows")
    failures = []
    if not err_o < tol:
        failures.append(f"{tag}: O rel err {err_o:.2e}")
    if not err_l < tol:
        failures.append(f"{tag}: LSE rel err {err_l:.2e}")
    if not (np.all(o[empty] == 0) and np.all(lse[empty] == -np.inf)):
        failures.append(f"{tag}: empty rows are not O = 0, LSE = -inf")
    if np.isnan(o).any() or np.isnan(lse).any():
        failures.append(f"{tag}: NaN in the output")
    return failures
