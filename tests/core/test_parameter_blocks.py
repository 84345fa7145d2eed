"""Parameter blocks: selection by name / index expression / mask, gather–scatter round trip,
untouched unselected entries, functional behaviour under vmap and jvp, install."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.func import functional_call, jvp, vmap

from paramsym.errors import MaskError, NonFiniteError, ParameterNameError, ShapeError
from paramsym.params import ParameterBlock, detached_params, install


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def _params(net):
    return {k: v.detach().clone() for k, v in net.named_parameters()}


def test_selection_forms_pick_the_right_entries():
    net = _net()
    P = _params(net)
    W, W2 = P["0.weight"], P["2.weight"]
    mask = torch.zeros(2, 4, dtype=torch.bool)
    mask[1, 0] = mask[0, 3] = True
    cases = [
        ("0.weight", W.reshape(-1)),
        ("0.weight[2]", W[2]),
        ("0.weight[2, :]", W[2]),
        ("0.weight[:, 1]", W[:, 1]),
        ("0.weight[1:3, 0]", W[1:3, 0]),
        ("0.weight[::2, -1]", W[::2, -1]),
        (("2.weight", mask), W2[mask]),  # row-major order of the mask's True entries
    ]
    for sel, expected in cases:
        block = ParameterBlock(P, sel)
        assert block.size == expected.numel(), sel
        assert torch.equal(block.gather(P), expected), sel


def test_multiple_selections_merge_and_keep_order():
    P = _params(_net())
    block = ParameterBlock(P, ["2.weight[:, 1]", "0.bias", "2.weight[0, 3]"])
    assert block.names == ["2.weight", "0.bias"]
    W2 = P["2.weight"]
    # 2.weight entries merged (flat order (0,1), (0,3), (1,1)), then 0.bias
    expected = torch.cat([torch.stack([W2[0, 1], W2[0, 3], W2[1, 1]]), P["0.bias"]])
    assert torch.equal(block.gather(P), expected)
    assert block.entry_slices() == {"2.weight": slice(0, 3), "0.bias": slice(3, 7)}
    assert block.describe()[0] == {"name": "2.weight", "shape": [2, 4], "selected": 3, "offset": 0}


def test_scatter_round_trip_and_unselected_entries_untouched():
    P = _params(_net())
    block = ParameterBlock(P, ["0.weight[:, 1]", "2.weight", "2.bias[1]"])
    theta = torch.randn(block.size, generator=torch.Generator().manual_seed(1))
    Q = block.scatter(theta, P)
    assert torch.equal(block.gather(Q), theta)
    # selected positions changed to θ, everything else bitwise identical
    assert torch.equal(Q["0.weight"][:, 1], theta[:4])
    keep = torch.ones(4, 3, dtype=torch.bool)
    keep[:, 1] = False
    assert torch.equal(Q["0.weight"][keep], P["0.weight"][keep])
    assert torch.equal(Q["2.weight"].reshape(-1), theta[4:12])
    assert torch.equal(Q["2.bias"][0], P["2.bias"][0]) and Q["2.bias"][1] == theta[12]
    assert Q["0.bias"] is P["0.bias"]  # tensors outside the block are passed through
    # the input dict is not modified
    assert not torch.equal(P["2.weight"].reshape(-1), theta[4:12])


def test_scatter_under_vmap_and_jvp_matches_manual_model():
    net = _net()
    P = _params(net)
    block = ParameterBlock(P, ["0.weight[1]", "2.weight[:, 1]"])
    X = torch.randn(5, 3, generator=torch.Generator().manual_seed(2))

    def F(theta):
        return functional_call(net, block.scatter(theta, P), (X,)).reshape(-1)

    gen = torch.Generator().manual_seed(3)
    thetas = torch.randn(6, block.size, generator=gen)
    batched = vmap(F)(thetas)
    for k in range(6):
        with torch.no_grad():
            m = install(net, block, thetas[k])
            assert torch.allclose(batched[k], m(X).reshape(-1), atol=1e-6)
    # jvp through scatter equals central differences (float64)
    net64 = _net().double()
    P64 = _params(net64)
    X64 = X.double()

    def F64(theta):
        return functional_call(net64, block.scatter(theta, P64), (X64,)).reshape(-1)

    th = block.gather(P64)
    v = torch.randn(block.size, generator=gen, dtype=torch.float64)
    _, tangent = jvp(F64, (th,), (v,))
    fd = (F64(th + 1e-6 * v) - F64(th - 1e-6 * v)) / 2e-6
    assert torch.allclose(tangent, fd, rtol=1e-7, atol=1e-9)
    # and only the block's entries carry a tangent
    tang_params = jvp(lambda t: block.scatter(t, P64)["0.weight"], (th,), (v,))[1]
    assert torch.equal(tang_params[0], torch.zeros(3, dtype=torch.float64))
    assert torch.equal(tang_params[1], v[:3])


def test_install_returns_a_copy_with_the_block_set():
    net = _net()
    block = ParameterBlock.from_module(net, ["2.weight[1]"])
    theta = torch.tensor([1.0, 2.0, 3.0, 4.0])
    new = install(net, block, theta)
    assert torch.equal(new[2].weight[1], theta)
    assert torch.equal(new[2].weight[0], net[2].weight[0])
    assert not torch.equal(net[2].weight[1], theta)  # the original is untouched
    with pytest.raises(NonFiniteError, match="θ to install"):
        install(net, block, torch.tensor([1.0, float("nan"), 0.0, 0.0]))


def test_detached_params_include_buffers():
    net = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    P = detached_params(net)
    assert "1.running_mean" in P and not any(v.requires_grad for v in P.values())


def test_bad_selections_raise_named_errors_that_say_what_to_do():
    P = _params(_net())
    with pytest.raises(ParameterNameError) as exc:
        ParameterBlock(P, "fc1.weight")
    msg = str(exc.value)
    assert "'fc1.weight'" in msg and "0.weight (4, 3)" in msg and "2.bias (2,)" in msg  # lists the names
    assert isinstance(exc.value, KeyError)
    with pytest.raises(MaskError, match=r"shape \(2, 2\).*parameter has shape \(2, 4\)"):
        ParameterBlock(P, ("2.weight", torch.zeros(2, 2, dtype=torch.bool)))
    with pytest.raises(MaskError, match="dtype"):
        ParameterBlock(P, ("2.weight", torch.zeros(2, 4)))
    with pytest.raises(MaskError, match="out of range"):
        ParameterBlock(P, "0.weight[7]")
    with pytest.raises(MaskError, match="3 dimensions|has 3 indices"):
        ParameterBlock(P, "0.weight[1, 2, 0]")
    with pytest.raises(MaskError, match="cannot parse"):
        ParameterBlock(P, "0.weight[a]")
    with pytest.raises(MaskError, match="empty"):
        ParameterBlock(P, ("2.weight", torch.zeros(2, 4, dtype=torch.bool)))
    with pytest.raises(MaskError, match="at least one"):
        ParameterBlock(P, [])
    block = ParameterBlock(P, "2.bias")
    with pytest.raises(ShapeError, match="p = 2"):
        block.scatter(torch.zeros(3), P)


def test_whole_tensor_block_is_the_jacobian_layout():
    """from_params/from_module of whole tensors: flatten/unflatten round trip (views), slice,
    owner, and the same block as the mask path."""
    net = _net()
    P = _params(net)
    block = ParameterBlock.from_params(P)
    assert block.is_whole and block.names == list(P) and block.numel == block.size == 4 * 3 + 4 + 2 * 4 + 2
    assert block.shapes == tuple(tuple(v.shape) for v in P.values())
    assert block.offsets == (0, 12, 16, 24) and block.sizes == (12, 4, 8, 2)
    theta = block.flatten(P)
    assert torch.equal(theta, ParameterBlock(P, list(P)).gather(P))  # the mask path agrees
    back = block.unflatten(theta)
    assert all(torch.equal(back[k], P[k]) for k in P)
    assert back["2.bias"].data_ptr() == theta[24:].data_ptr()  # views of θ
    assert block.slice("2.weight") == slice(16, 24)
    assert block.owner(16 + 5) == ("2.weight", 5) and block.owner(0) == ("0.weight", 0)
    # a partial block: owner reports the position inside the tensor; unflatten refuses
    part = ParameterBlock(P, ["0.weight[:, 1]", "2.bias"])
    assert part.owner(1) == ("0.weight", 4) and part.owner(4) == ("2.bias", 0)
    with pytest.raises(MaskError, match="scatter"):
        part.unflatten(part.gather(P))
    with pytest.raises(ShapeError, match=r"expected \(26,\)"):
        block.unflatten(theta[:-1])
    with pytest.raises(ShapeError, match="outside"):
        block.owner(26)
    with pytest.raises(ParameterNameError, match="Block parameters"):
        block.slice("1.weight")


def test_from_module_by_names_predicate_or_requires_grad_with_one_error_style():
    net = _net()
    net[2].bias.requires_grad_(False)
    assert ParameterBlock.from_module(net).names == ["0.weight", "0.bias", "2.weight"]
    assert ParameterBlock.from_module(net, lambda n: n.startswith("2.")).names == ["2.weight", "2.bias"]
    assert ParameterBlock.from_module(net, ["2.bias", "0.weight"]).names == ["2.bias", "0.weight"]
    assert ParameterBlock.from_module(net, "0.bias").is_whole
    # one name check, one message style, whatever the route
    msgs = []
    for sel in (["9.weight"], "9.weight", "9.weight[0]"):
        with pytest.raises(ParameterNameError) as exc:
            ParameterBlock.from_module(net, sel)
        msgs.append(str(exc.value))
    assert all("no parameter named '9.weight'" in m and "Available parameters: 0.weight (4, 3)" in m for m in msgs)
    with pytest.raises(ParameterNameError, match="selected by the predicate.*Available parameters"):
        ParameterBlock.from_module(net, lambda n: False)
    with pytest.raises(MaskError, match="at least one"):
        ParameterBlock.from_params({})
