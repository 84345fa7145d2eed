"""Normalisation scale moved into the next linear layer(s) (nn.LayerNorm, nn.RMSNorm), float64:
the verdict passes with output error ≤ 1e-10 and non-zero motion; a norm that also feeds a
residual is caught; and the catalogue registry lists every kind with its class."""

from __future__ import annotations

import pytest
import torch
from catalogue_helpers import DT, gen
from torch import nn

from paramsym.actions.catalogue import NormScaleAction, catalogue
from paramsym.actions.exact import ExactAction
from paramsym.errors import ActionError, ShapeError
from paramsym.targets import Target
from paramsym.testing import check_action


class NormThenLinear(nn.Module):
    def __init__(self, norm: nn.Module, residual: bool = False, consumers: int = 1):
        super().__init__()
        torch.manual_seed(0)
        self.norm = norm
        self.fcs = nn.ModuleList(nn.Linear(6, 3) for _ in range(consumers))
        self.residual = residual
        with torch.no_grad():
            for p in self.norm.parameters():
                p.normal_(1.0, 0.5)

    def forward(self, x):
        y = self.norm(x)
        out = torch.cat([fc(y) for fc in self.fcs], -1)
        return out + y[..., :3] if self.residual else out


X = torch.randn(16, 6, generator=gen(1), dtype=DT)


@pytest.mark.parametrize("norm, consumers", [(nn.LayerNorm(6), 1), (nn.LayerNorm(6), 2), (nn.RMSNorm(6), 1)],
                         ids=["layernorm", "layernorm-2-consumers", "rmsnorm"])
def test_norm_scale_passes_the_verdict(norm, consumers):
    model = NormThenLinear(norm, consumers=consumers).to(DT)
    names = [n for n, _ in model.named_parameters() if not n.endswith("fcs.0.bias") and not n.endswith("fcs.1.bias")]
    F = Target(model, names, X)
    later = [f"fcs.{k}.weight" for k in range(consumers)]
    action = NormScaleAction.for_modules(F.block, model.norm, "norm", later)
    assert action.dimension == 6
    check = check_action(action, F, samples=64)
    assert check.passed, check.summary()
    assert check.value("output") <= 1e-10 and check.value("output", 2) <= 1e-10 and check.value("motion") > 0.05


def test_norm_scale_closed_form_and_wrong_claim():
    model = NormThenLinear(nn.LayerNorm(6)).to(DT)
    F = Target(model, ["norm.weight", "norm.bias", "fcs.0.weight"], X)
    action = NormScaleAction(F.block, "norm.weight", "fcs.0.weight")
    d = torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25, 1.5], dtype=DT)
    got = action.act(torch.diag(d), F.theta0)
    expect = torch.cat([d * model.norm.weight.detach(), d * model.norm.bias.detach(), (model.fcs[0].weight.detach() / d).reshape(-1)])
    assert torch.equal(got, expect)
    res = NormThenLinear(nn.LayerNorm(6), residual=True).to(DT)
    R = Target(res, ["norm.weight", "norm.bias", "fcs.0.weight"], X)
    assert not check_action(NormScaleAction(R.block, "norm.weight", "fcs.0.weight"), R, samples=32).passed


def test_norm_scale_bad_input():
    model = NormThenLinear(nn.LayerNorm(6)).to(DT)
    blk = Target(model, ["norm.weight", "norm.bias", "fcs.0.weight", "fcs.0.bias"], X).block
    with pytest.raises(ActionError, match=r"fcs\.0\.bias"):
        NormScaleAction(blk, "norm.weight", "fcs.0.weight")
    with pytest.raises(ShapeError, match=r"\(m, 6\)"):
        NormScaleAction(blk, "norm.weight", "norm.bias")
    with pytest.raises(ActionError, match="elementwise"):
        NormScaleAction.for_modules(blk, nn.LayerNorm(6, elementwise_affine=False), "norm", "fcs.0.weight")


def test_registry_lists_every_kind():
    rows = catalogue()
    kinds = [k for k, _, _ in rows]
    assert kinds == ["hidden_basis", "linear_chain", "rescaling", "key_bias_translation", "value_bias_shift", "norm_scale",
                     "ov_redistribution", "hidden_permutation", "head_permutation", "sign_flip"]
    for kind, cls, text in rows:
        assert issubclass(cls, ExactAction) and cls.kind == kind and ("dimension" in text or "order" in text)
        assert cls.__doc__ and "Raises" in cls.__doc__


def test_group_is_built_lazily_in_the_action_dtype():
    model = NormThenLinear(nn.LayerNorm(6)).to(DT)
    F = Target(model, ["norm.weight", "norm.bias", "fcs.0.weight"], X)
    action = NormScaleAction(F.block, "norm.weight", "fcs.0.weight")
    assert "group" not in action._modules
    assert action.double().group.generators().dtype == torch.float64
    assert action.group.num_generators == 6


def test_value_bias_shift_on_multihead_attention():
    """``b_v ↦ b_v + c``, ``b_o ↦ b_o − W_o c`` on a real nn.MultiheadAttention (float64): output
    unchanged ≤ 1e-10 s_F, parameters move; without the output-bias compensation it fails."""
    from paramsym.actions.translation import ValueBiasShift
    from paramsym.params import ParameterBlock
    from paramsym.targets import Target
    from paramsym.testing import check_action

    torch.manual_seed(0)

    class SelfAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True).double()
            with torch.no_grad():
                self.attn.in_proj_bias.normal_()
                self.attn.out_proj.bias.normal_()

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]

    net = SelfAttention()
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    F = Target(net, ["attn.in_proj_bias[16:24]", "attn.out_proj.weight", "attn.out_proj.bias"], x)
    # the action on named copies laid out exactly like F's block (value third of in_proj_bias, W_o, b_o)
    assert [e.name for e in F.block.entries] == ["attn.in_proj_bias", "attn.out_proj.weight", "attn.out_proj.bias"]
    params = {"b_v": net.attn.in_proj_bias.detach()[16:].clone(), "W_o": net.attn.out_proj.weight.detach(),
              "b_o": net.attn.out_proj.bias.detach()}
    blk = ParameterBlock.from_params(params, ["b_v", "W_o", "b_o"])
    action = ValueBiasShift(blk, "b_v", "W_o", "b_o", heads=2)
    assert action.dimension == 8 and action.kind == "value_bias_shift"
    check = check_action(action, F, samples=24)
    assert check.passed and check.value("output") <= 1e-10 and check.value("motion") > 0.05, check.summary()

    class NoCompensation(ValueBiasShift):
        def act(self, g, theta):
            c = g[:-1, -1].to(theta.dtype)
            return torch.cat([theta[self.v_loc] + c, theta[self.w_loc], theta[self.o_loc]])

    bad = check_action(NoCompensation(blk, "b_v", "W_o", "b_o", heads=2), F, samples=24, factors=(1,))
    assert not bad.passed and "output" in [r.name for r in bad.failures]
