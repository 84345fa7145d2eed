"""Key-bias translations, head permutations (nn.MultiheadAttention with biases, RMHSA) and OV
redistribution within a QK cluster of RMHSA, on real modules in float64: the verdict passes with
output error ≤ 1e-10 and non-zero motion; wrong claims fail; bad blocks get named errors."""

from __future__ import annotations

import math

import pytest
import torch
from catalogue_helpers import DT, discrete_verdict, gen, module_scale, rmhsa_with_cluster
from torch import nn

from paramsym.actions.catalogue import (
    HeadPermutationAction,
    KeyBiasTranslation,
    OVRedistributionAction,
    permutation_matrix,
    qk_clusters,
)
from paramsym.errors import ActionError, ShapeError, UnsupportedLayerError
from paramsym.targets import Target
from paramsym.testing import check_action

E, H, L = 8, 4, 5


class SelfAttention(nn.Module):
    """Self-attention (or cross-attention with kdim/vdim) through nn.MultiheadAttention; batch_first=False
    keeps torch off its fused fast path, which has no vmap batching rule."""

    def __init__(self, **kw):
        super().__init__()
        torch.manual_seed(0)
        self.attn = nn.MultiheadAttention(E, H, **kw)
        with torch.no_grad():
            for p in self.attn.parameters():
                if p.ndim <= 1 or p.shape[0] == 1:
                    p.normal_(0, 0.5)  # biases of order one (torch initialises them to zero)

    def forward(self, x, k=None, v=None):
        x, k, v = (t.transpose(0, 1) for t in (x, x if k is None else k, x if v is None else v))
        return self.attn(x, k, v, need_weights=True)[0].transpose(0, 1)


def _mha(**kw) -> SelfAttention:
    return SelfAttention(**kw).to(DT)


X = torch.randn(3, L, E, generator=gen(1), dtype=DT)


@pytest.mark.parametrize("kw", [{}, {"add_bias_kv": True}, {"kdim": 6, "vdim": 5}], ids=["plain", "bias_kv", "kdim"])
def test_key_bias_translation_on_multihead_attention(kw):
    model = _mha(**kw)
    sel = [f"attn.in_proj_bias[{E}:{2 * E}]"] + (["attn.bias_k"] if kw.get("add_bias_kv") else [])
    batch = (X, torch.randn(3, L, kw.get("kdim", E), dtype=DT), torch.randn(3, L, kw.get("vdim", E), dtype=DT)) \
        if "kdim" in kw else X
    F = Target(model, sel, batch)
    action = KeyBiasTranslation.for_mha(F.block, model.attn, "attn")
    assert action.dimension == E and action.per_head == E // H
    check = check_action(action, F, s_F=module_scale(model, batch), s_theta=float(F.theta0.norm()), samples=64)
    assert check.passed, check.summary()
    assert check.value("output") <= 1e-10 and check.value("output", 2) <= 1e-10 and check.value("motion") > 0.05


def test_key_bias_translation_bare_layout_and_a_wrong_claim():
    model = _mha()
    s_F, s_t = module_scale(model, X), 1.0
    # the same bias named by positions of the packed tensor (the bare layout)
    F = Target(model, [f"attn.in_proj_bias[{E}:{2 * E}]"], X)
    ok = check_action(KeyBiasTranslation(F.block, "attn.in_proj_bias", positions=(E, 2 * E)), F, s_F=s_F, s_theta=s_t, samples=32)
    assert ok.passed and ok.value("output") <= 1e-10
    # translating the *query* bias is not a symmetry: the verdict says so
    Q = Target(model, [f"attn.in_proj_bias[0:{E}]"], X)
    wrong = check_action(KeyBiasTranslation(Q.block, "attn.in_proj_bias", positions=(0, E)), Q, s_F=s_F, s_theta=s_t, samples=32)
    assert not wrong.passed and wrong.value("output") > 1e-3


def test_key_bias_bad_input():
    model = _mha()
    whole = Target(model, ["attn.in_proj_bias"], X).block
    with pytest.raises(ActionError, match="untouched"):
        KeyBiasTranslation.for_mha(whole, model.attn, "attn")
    with pytest.raises(UnsupportedLayerError, match="add_zero_attn"):
        KeyBiasTranslation.for_mha(whole, _mha(add_zero_attn=True).attn, "attn")
    nobias = SelfAttention(bias=False).to(DT)
    with pytest.raises(UnsupportedLayerError, match="no in_proj_bias"):
        KeyBiasTranslation.for_mha(Target(nobias, ["attn.in_proj_weight"], X).block, nobias.attn, "attn")
    part = Target(model, [f"attn.in_proj_bias[{E}:{E + 3}]"], X).block
    with pytest.raises(ShapeError, match="not selected"):
        KeyBiasTranslation.for_mha(part, model.attn, "attn")


def _mha_head_block(model, extra=()):
    names = ["attn.in_proj_weight", "attn.in_proj_bias", *extra, "attn.out_proj.weight"]
    return Target(model, names, X)


@pytest.mark.parametrize("kw", [{}, {"add_bias_kv": True}], ids=["plain", "bias_kv"])
def test_head_permutation_on_multihead_attention(kw):
    model = _mha(**kw)
    F = _mha_head_block(model, ["attn.bias_k", "attn.bias_v"] if kw else [])
    action = HeadPermutationAction.for_mha(F.block, model.attn, "attn")
    assert action.dimension == 0 and action.order == math.factorial(H) == 24
    v = discrete_verdict(action, F)
    assert v["output"] <= 1e-10 and v["composition"] <= 1e-13 and v["inverse"] <= 1e-13, v
    assert v["min_motion"] > 0.05, v
    with pytest.raises(ActionError, match="discrete"):
        _ = action.group


def test_head_permutation_closed_form_and_order():
    model = _mha()
    F = _mha_head_block(model)
    action = HeadPermutationAction.for_mha(F.block, model.attn, "attn")
    P = permutation_matrix([1, 2, 3, 0])  # a 4-cycle: order 4
    th = F.theta0
    moved = th
    for k in range(1, 5):
        moved = action.act(P, moved)
        assert torch.equal(moved, th) == (k == 4)
    out = action.act(P, th)
    Wo = model.attn.out_proj.weight.detach()
    got = out[-E * E:].reshape(E, E)
    assert torch.equal(got[:, 0:2], Wo[:, 2:4])  # new head 0 = old head 1 (d_h = 2)


def test_head_permutation_bad_input():
    model = _mha()
    with pytest.raises(ActionError, match="in_proj_bias"):
        HeadPermutationAction.for_mha(Target(model, ["attn.in_proj_weight", "attn.out_proj.weight"], X).block,
                                      model.attn, "attn")
    blk = Target(model, ["attn.in_proj_weight", "attn.in_proj_bias", "attn.out_proj.weight", "attn.out_proj.bias"], X).block
    with pytest.raises(ActionError, match=r"out_proj\.bias"):
        HeadPermutationAction.for_mha(blk, model.attn, "attn")
    with pytest.raises(ShapeError, match="heads"):
        HeadPermutationAction(blk, 3, {"attn.in_proj_weight": (3, 16)})


def test_head_permutation_and_redistribution_on_rmhsa():
    model = rmhsa_with_cluster(H=3, d=4, cluster=(0, 1))
    x = torch.randn(2, L, 4, generator=gen(2), dtype=DT)
    F = Target(model, ["M", "R"], x)
    perm = HeadPermutationAction.for_rmhsa(F.block, "M", "R")
    v = discrete_verdict(perm, F)
    assert perm.order == 6 and v["output"] <= 1e-10 and v["min_motion"] > 0.05, v
    assert qk_clusters(model.M.detach()) == [[0, 1]]
    G = Target(model, ["R[0:2]"], x)
    red = OVRedistributionAction(G.block, "R", qk_clusters(model.M.detach()))
    assert red.dimension == (2 - 1) * 4 * 4
    check = check_action(red, G, samples=64)
    assert check.passed, check.summary()
    assert check.value("output") <= 1e-10 and check.value("output", 2) <= 1e-10 and check.value("motion") > 0.05
    # the summed OV map is fixed, the individual ones move
    g = red.random_elements(1, gen(5), rho=1.0)[0].double()
    Rn = red.act(g, G.theta0).reshape(2, 4, 4)
    R0 = G.theta0.reshape(2, 4, 4)
    assert (Rn.sum(0) - R0.sum(0)).abs().max() <= 1e-15 and (Rn - R0).abs().max() > 0.1


def test_redistribution_two_clusters_and_wrong_claim_and_bad_input():
    model = rmhsa_with_cluster(H=4, d=3, cluster=(0, 2))
    with torch.no_grad():
        model.M[3] = model.M[1]
    x = torch.randn(2, L, 3, generator=gen(2), dtype=DT)
    F = Target(model, ["R"], x)
    clusters = qk_clusters(model.M.detach())
    assert clusters == [[0, 2], [1, 3]]
    red = OVRedistributionAction(F.block, "R", clusters)
    assert red.dimension == 2 * 9
    check = check_action(red, F, samples=32)
    assert check.passed and check.value("output") <= 1e-10
    wrong = OVRedistributionAction(F.block, "R", [[0, 1], [2, 3]])  # heads 0, 1 have different M
    assert not check_action(wrong, F, samples=32).passed
    with pytest.raises(ActionError, match="untouched"):
        OVRedistributionAction(F.block, "R", [[0, 2]])
    with pytest.raises(ShapeError, match="at least two"):
        OVRedistributionAction(F.block, "R", [[0]])
    with pytest.raises(ShapeError, match="disjoint"):
        OVRedistributionAction(F.block, "R", [[0, 2], [2, 3]])
