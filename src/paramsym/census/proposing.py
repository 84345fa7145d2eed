"""Proposing: the hypotheses of a layer's attention and FFN structure, each kept only when verified.

From the traced dataflow (:func:`paramsym.census.tracing.dataflow`): the attention writer's
reader features that act only on their own token are the **queries**, those reaching later
tokens the **keys/values**, split by hypotheses (``[K | V]``, ``[V | K]``, per key/value head
``[k_g | v_g]``) with ``H`` from the config, ``d = |q| / H``, ``H_kv = |k| / d``; the FFN's
readers are one ``up``, two (gated: ``up`` is the one whose scaling the writer absorbs), or one
fused ``[gate | up]`` / ``[up | gate]``. Each hypothesis is handed to
:class:`~paramsym.census.verifying.Invariance` and kept only when the catalogue's actions
verify on the actual weights; otherwise :class:`~paramsym.errors.TraceError` lists what was tried.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import TraceError
from ..models.adapters import AttentionLayout, FFNLayout, Projection, _inv_freq
from .tracing import common_prefix, projection

__all__ = ["propose_attention", "propose_experts", "propose_ffn"]


def propose_attention(i, prefix, aw, flow, lr, linears, H, rot, model, invariant, found) -> AttentionLayout:
    q_feats, kv_feats = [], []
    for r in lr:
        if r not in flow["local"] and r not in flow["cross"]:
            continue
        loc = flow["local"].get(r)
        cr = flow["cross"].get(r)
        n = (loc if loc is not None else cr).numel()
        for j in range(n):
            c = bool(cr[j]) if cr is not None else False
            lo = bool(loc[j]) if loc is not None else False
            if c:
                kv_feats.append((r, j))
            elif lo:
                q_feats.append((r, j))
    where = f"layer {prefix[:-1]} attention (output {aw})"
    if not q_feats or not kv_feats:
        raise TraceError(f"{where}: found {len(q_feats)} query-like and {len(kv_feats)} key/value-like reader features; "
                         f"expected both. Found so far: {found}.")
    q_mods = {r for r, _ in q_feats}
    if len(q_mods) != 1:
        raise TraceError(f"{where}: query features come from several modules {sorted(q_mods)}. Found so far: {found}.")
    qm = q_mods.pop()
    nq = len(q_feats)
    if nq % H:
        raise TraceError(f"{where}: {nq} query features are not divisible by the {H} heads of the config. Found so far: "
                         f"{found}.")
    d = nq // H
    if len(kv_feats) % (2 * d):
        raise TraceError(f"{where}: {len(kv_feats)} key/value features do not split into key and value heads of "
                         f"dimension {d}. Found so far: {found}.")
    nkv = len(kv_feats) // 2
    Hkv = nkv // d
    if H % Hkv:
        raise TraceError(f"{where}: {H} query heads do not group over {Hkv} key/value heads. Found so far: {found}.")
    hyps = {"[K | V]": (kv_feats[:nkv], kv_feats[nkv:]), "[V | K]": (kv_feats[nkv:], kv_feats[:nkv]),
            "per key/value head [k | v]": ([f for g in range(Hkv) for f in kv_feats[2 * g * d: 2 * g * d + d]],
                                           [f for g in range(Hkv) for f in kv_feats[2 * g * d + d: 2 * g * d + 2 * d]])}
    o = projection(linears, aw, None)
    freqs = _inv_freq(model, rot) if rot else ()
    tried: list[str] = []
    partial: list[AttentionLayout] = []
    for label, (kf, vf) in hyps.items():
        km, vm = {r for r, _ in kf}, {r for r, _ in vf}
        if len(km) != 1 or len(vm) != 1:
            tried.append(f"{label}: keys/values span modules")
            continue
        k = projection(linears, km.pop(), [j for _, j in kf])
        v = projection(linears, vm.pop(), [j for _, j in vf])
        q = projection(linears, qm, [j for _, j in q_feats])
        lay = AttentionLayout(common_prefix([q.weight, o.weight]), q, k, v, o, H, Hkv, d, min(rot, d), freqs)
        if invariant.attention(lay):
            return lay
        tried.append(f"{label}: query/key or value/output action not invariant")
        partial.append(lay)
    for lay in partial:  # the value/output side alone: query/key refused for this layer, the rest kept
        if invariant.value_output(lay):
            return replace(lay, qk_refused=_qk_reason(lay, model, rot))
    raise TraceError(f"{where}: no key/value split verified ({'; '.join(tried)}); H={H}, d={d}, H_kv={Hkv}. Found so far: "
                     f"{found}.")


def _qk_reason(lay: AttentionLayout, model, rot: int) -> str:
    """Why query/key is refused: the parametrised modules inside the attention besides q, k, v, o
    (q/k norms act on queries and keys before the softmax), and the rotary pairing assumed."""
    own = {p.weight.rsplit(".", 1)[0] for p in (lay.q, lay.k, lay.v, lay.o)}
    extra = sorted(n for n, m in model.named_modules() if n.startswith(f"{lay.module}.") and n not in own
                   and any(True for _ in m.parameters(recurse=False)))
    why = [f"queries/keys pass through {extra} before the softmax (GL(d_k) does not commute with them)"] if extra else []
    cfg = getattr(model, "config", None)
    declared = {k: getattr(cfg, k) for k in ("rotary_dim", "rope_theta") if getattr(cfg, k, None)}
    if not rot and declared:
        why.append(f"the config declares rotary embeddings ({declared}) that the tracer cannot place (no inv_freq "
                   "buffer): a position-dependent map acts on queries/keys")
    if rot:
        why.append(f"rotary on {min(rot, lay.head_dim)} of {lay.head_dim} dims: the commutant assumes rotate_half pairs "
                   "(i, i + r/2); the model may pair dimensions otherwise (interleaved, GPT-J/Cohere style)")
    return ("query/key symmetry not verified on the actual weights (value/output verified); "
            + ("; ".join(why) if why else "the scores are not q·k of the traced projections"))


def propose_ffn(prefix, fw, ffn_readers, linears, act, invariant, found) -> FFNLayout:
    down = projection(linears, fw, None)
    h = down.in_features
    where = f"layer {prefix[:-1]} FFN (output {fw})"
    outs = {r: projection(linears, r, None).out_features for r in ffn_readers}
    module = common_prefix([*ffn_readers, fw]) or fw
    if len(ffn_readers) == 1 and outs[ffn_readers[0]] == h:
        return FFNLayout(module, projection(linears, ffn_readers[0], None), down, act)
    if len(ffn_readers) == 2 and all(v == h for v in outs.values()):
        a, b = ffn_readers
        for up, gate in ((a, b), (b, a)):
            pu, pg = projection(linears, up, None), projection(linears, gate, None)
            if invariant.ffn_up(pu, down) and not invariant.ffn_up(pg, down):
                return FFNLayout(module, pu, down, act, gate=pg)
        raise TraceError(f"{where}: two readers {ffn_readers}, but neither alone is absorbed linearly by {fw} (no gated "
                         f"'up' found). Found so far: {found}.")
    if len(ffn_readers) == 1 and outs[ffn_readers[0]] == 2 * h:
        r = ffn_readers[0]
        for up, gate in ((range(h, 2 * h), range(h)), (range(h), range(h, 2 * h))):
            pu, pg = projection(linears, r, list(up)), projection(linears, r, list(gate))
            if invariant.ffn_up(pu, down) and not invariant.ffn_up(pg, down):
                return FFNLayout(module, pu, down, act, gate=pg)
        raise TraceError(f"{where}: fused reader {r} ({2 * h} features) splits neither as [gate | up] nor [up | gate]. "
                         f"Found so far: {found}.")
    raise TraceError(f"{where}: readers {outs} do not fit an FFN of {h} hidden units. Found so far: {found}.")




def propose_experts(bank, names, params, act, invariant, found) -> tuple[FFNLayout, ...]:
    """Every expert of the 3-D bank ``bank`` as an FFN: expert ``e``'s ``[gate | up]`` rows are
    ``gate_up[e]`` (``(2h, D)``), its down projection ``down[e]`` (``(D, h)``), both slices of the
    stored tensors (:attr:`Projection.offset`). Which half is ``up`` is verified on expert 0 (the
    FFN is linear in ``up``: scaling its rows is absorbed by ``down``'s columns, the gate's is not)
    and taken for every expert. A router weights the experts' outputs; it is no part of an expert."""
    gu, dn = names["gate_up"], names["down"]
    E, two_h, D = params[gu].shape
    h = two_h // 2

    def expert(e: int, up: range, gate: range) -> FFNLayout:
        proj = lambda feats: Projection(gu, None, "out_in", (two_h, D), tuple(feats), e * two_h * D)  # noqa: E731
        return FFNLayout(f"{bank}.{e}", proj(up), Projection(dn, None, "out_in", (D, h), None, e * D * h), act,
                         gate=proj(gate))

    for up, gate in ((range(h, 2 * h), range(h)), (range(h), range(h, 2 * h))):
        e0 = expert(0, up, gate)
        if invariant.ffn_up(e0.up, e0.down) and not invariant.ffn_up(e0.gate, e0.down):
            return tuple(expert(e, up, gate) for e in range(E))
    raise TraceError(f"expert bank {bank}: {gu} {tuple(params[gu].shape)} splits neither as [gate | up] nor "
                     f"[up | gate] on expert 0 (no rescaling of one half is absorbed by {dn}). Found so far: {found}.")
