"""Analytic symmetry bases written independently of the solver (explicit index loops)."""

from __future__ import annotations

import torch


def _idx(block, name):
    return block.slice(name).start


def zero_ab(p):
    return torch.zeros(p, p + 1, dtype=torch.float64)


def _layer_pair(block, params, first: str, second: str):
    """``(p, h, n, m, o1, o2)`` of W1 = params[first] (h × n) and W2 = params[second] (m × h):
    the block size, the shapes and the offsets of W1 and W2 in θ."""
    h, n = params[first].shape
    return block.size, h, n, params[second].shape[0], _idx(block, first), _idx(block, second)


def gl_between(block, params, first: str, second: str):
    """gl(h) on the hidden space between W1 = params[first] (h × n) and W2 = params[second]
    (m × h): δW1 = E W1, δW2 = −W2 E, for E = E_rs. Entries of [A | b] (p × (p+1))."""
    p, h, n, m, o1, o2 = _layer_pair(block, params, first, second)
    out = []
    for r in range(h):
        for s in range(h):
            ab = zero_ab(p)
            for c in range(n):  # δW1[r, c] = W1[s, c]
                ab[o1 + r * n + c, o1 + s * n + c] += 1.0
            for i in range(m):  # δW2[i, s] = −W2[i, r]
                ab[o2 + i * h + s, o2 + i * h + r] -= 1.0
            out.append(ab)
    return out


def unit_rescalings(block, params, first: str, second: str, bias: str | None = None):
    """Per hidden unit u: δW1[u, :] = W1[u, :], δb1[u] = b1[u], δW2[:, u] = −W2[:, u]."""
    p, h, n, m, o1, o2 = _layer_pair(block, params, first, second)
    out = []
    for u in range(h):
        ab = zero_ab(p)
        for c in range(n):
            ab[o1 + u * n + c, o1 + u * n + c] = 1.0
        if bias is not None:
            ob = _idx(block, bias)
            ab[ob + u, ob + u] = 1.0
        for i in range(m):
            ab[o2 + i * h + u, o2 + i * h + u] = -1.0
        out.append(ab)
    return out


def attention_basis(block, d: int, heads: int, bias: bool):
    """Per head gl(d_k) on query/key rows and gl(d_v) on value rows / output columns; with
    biases also the key-bias translations and the value-bias shifts absorbed by the output bias."""
    p = block.size
    dk = d // heads
    ow, oo = _idx(block, "in_proj_weight"), _idx(block, "out_proj.weight")
    ob = _idx(block, "in_proj_bias") if bias else None
    oob = _idx(block, "out_proj.bias") if bias else None
    out = []

    def wrow(row, col):  # in_proj_weight[row, col]
        return ow + row * d + col

    for hd in range(heads):
        for r in range(dk):
            for s in range(dk):
                for part in ("qk", "vo"):
                    ab = zero_ab(p)
                    if part == "qk":
                        q_r, q_s = hd * dk + r, hd * dk + s
                        k_r, k_s = d + hd * dk + r, d + hd * dk + s
                        for c in range(d):
                            ab[wrow(q_r, c), wrow(q_s, c)] += 1.0  # δW_q[r] = W_q[s]
                            ab[wrow(k_s, c), wrow(k_r, c)] -= 1.0  # δW_k = −Eᵀ W_k
                        if bias:
                            ab[ob + q_r, ob + q_s] += 1.0
                            ab[ob + k_s, ob + k_r] -= 1.0
                    else:
                        v_r, v_s = 2 * d + hd * dk + r, 2 * d + hd * dk + s
                        for c in range(d):
                            ab[wrow(v_r, c), wrow(v_s, c)] += 1.0  # δW_v = E W_v
                        for i in range(d):  # δW_o[:, h·dk + s] = −W_o[:, h·dk + r]
                            ab[oo + i * d + hd * dk + s, oo + i * d + hd * dk + r] -= 1.0
                        if bias:
                            ab[ob + v_r, ob + v_s] += 1.0
                    out.append(ab)
    if bias:
        for i in range(d):  # key-bias translation
            ab = zero_ab(p)
            ab[ob + d + i, p] = 1.0
            out.append(ab)
        for i in range(d):  # δb_v = e_i, δb_o = −W_o e_i
            ab = zero_ab(p)
            ab[ob + 2 * d + i, p] = 1.0
            for o in range(d):
                ab[oob + o, oo + o * d + i] = -1.0
            out.append(ab)
    return out


def analytic_basis(name: str, target):
    """Stacked analytic [A | b] (k, p, p+1) for a preset."""
    block, params = target.block, target.params
    if name == "linear2x2":
        mats = gl_between(block, params, "fc1.weight", "fc2.weight")
    elif name == "linear3x2":
        mats = gl_between(block, params, "fc1.weight", "fc2.weight") + gl_between(block, params, "fc2.weight",
                                                                                 "fc3.weight")
    elif name == "relu242":
        mats = unit_rescalings(block, params, "fc1.weight", "fc2.weight")
    elif name == "relu2881":
        mats = unit_rescalings(block, params, "fc1.weight", "fc2.weight") + unit_rescalings(
            block, params, "fc2.weight", "fc3.weight")
    elif name == "leakyrelu-bias":
        mats = unit_rescalings(block, params, "fc1.weight", "fc2.weight", "fc1.bias")
    elif name == "attention-d8h2":
        mats = attention_basis(block, 8, 2, False)
    elif name == "attention-d8h2-bias":
        mats = attention_basis(block, 8, 2, True)
    else:
        return torch.zeros(0, block.size, block.size + 1, dtype=torch.float64)
    return torch.stack(mats)
