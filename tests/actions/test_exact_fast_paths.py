"""Exact shortcuts of the catalogue actions at real widths (issue 34): a permutation matrix applied
by indexing, and the exponential of a diagonal direction taken entrywise — each equal to the dense
computation it replaces."""

import torch

from paramsym.actions.exact import random_exp
from paramsym.actions.linear import RescalingAction
from paramsym.actions.normalization import NormScaleAction
from paramsym.actions.permutation import (
    HeadPermutationAction,
    HiddenPermutationAction,
    SignFlipAction,
    as_permutation,
)
from paramsym.params import ParameterBlock


def _block(h=7):
    g = torch.Generator().manual_seed(0)
    p = {"fc1.weight": torch.randn(h, 5, generator=g, dtype=torch.float64),
         "fc1.bias": torch.randn(h, generator=g, dtype=torch.float64),
         "fc2.weight": torch.randn(3, h, generator=g, dtype=torch.float64)}
    return p, ParameterBlock.from_params(p, list(p))


def test_permutation_matrix_by_indexing_equals_the_dense_products():
    p, block = _block()
    act = HiddenPermutationAction(block, "fc1.weight", "fc2.weight")
    theta = block.gather(p)
    g = act.random_elements(1, torch.Generator().manual_seed(3))[0].double()
    assert as_permutation(g) is not None
    got = block.scatter(act.act(g, theta), p)
    assert torch.equal(got["fc1.weight"], g @ p["fc1.weight"]) and torch.equal(got["fc1.bias"], g @ p["fc1.bias"])
    assert torch.equal(got["fc2.weight"], p["fc2.weight"] @ g.T)
    assert not torch.equal(got["fc1.weight"], p["fc1.weight"])
    m = 2 * g  # not a permutation matrix: the dense products
    assert as_permutation(m) is None and as_permutation(g[:, :-1]) is None
    assert torch.equal(block.scatter(act.act(m, theta), p)["fc1.weight"], m @ p["fc1.weight"])


def test_diagonal_exponential_equals_the_matrix_exponential_of_the_same_draws():
    p, block = _block(9)
    act = RescalingAction(block, "fc1.weight", "fc2.weight")
    got = act.random_elements(3, torch.Generator().manual_seed(5))
    gen = torch.Generator().manual_seed(5)
    t = torch.randn(3, 9, generator=gen, dtype=got.dtype)
    ref = random_exp(torch.diag_embed(t), 0.5, gen)
    tol = 8 * torch.finfo(got.dtype).eps  # matrix_exp's Padé approximant against exp, entrywise
    assert torch.allclose(got, ref, rtol=tol, atol=tol) and not torch.allclose(got, torch.eye(9).expand(3, 9, 9))


def _head_block(H=5, dh=3, E=4):
    g = torch.Generator().manual_seed(1)
    p = {"q.weight": torch.randn(H * dh, E, generator=g, dtype=torch.float64),
         "o.weight": torch.randn(E, H * dh, generator=g, dtype=torch.float64)}
    block = ParameterBlock.from_params(p, list(p))
    return p, block, HeadPermutationAction(block, H, {"q.weight": (1, dh * E), "o.weight": (E, dh)})


def _compact_actions():
    p, block = _block(9)
    yield p, block, HiddenPermutationAction(block, "fc1.weight", "fc2.weight")
    yield p, block, SignFlipAction(block, "fc1.weight", "fc2.weight")
    yield p, block, RescalingAction(block, "fc1.weight", "fc2.weight")
    q = {"ln.weight": 1 + torch.rand(4, generator=torch.Generator().manual_seed(2), dtype=torch.float64),
         "a.weight": torch.randn(6, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)}
    qb = ParameterBlock.from_params(q, list(q))
    yield q, qb, NormScaleAction(qb, "ln.weight", ["a.weight"])
    yield _head_block()


def test_compact_elements_are_the_same_draws_and_act_as_their_dense_matrices():
    """``random_compact`` draws what ``random_elements(1)`` draws (its matrix is ``dense(c)``), and
    ``act_compact(c, θ)`` equals ``act(dense(c), θ)`` entry for entry (exact: indexing and
    one-term products), checked against the dense products written out here."""
    for p, block, act in _compact_actions():
        assert act.compact in ("permutation", "diagonal"), type(act).__name__
        for seed in range(3):
            c = act.random_compact(torch.Generator().manual_seed(seed))
            dense = act.random_elements(1, torch.Generator().manual_seed(seed))[0].double()
            assert c.dim() == 1 and c.shape[0] == act.size
            assert torch.equal(act.dense(c).double(), dense), type(act).__name__
            theta = block.gather(p)
            got = act.act_compact(c, theta)
            assert torch.equal(got, act.act(dense, theta)), type(act).__name__
            if not act.is_identity(c):
                assert not torch.equal(got, theta)
    p, block = _block(9)  # the sign flips against the products written out
    act = SignFlipAction(block, "fc1.weight", "fc2.weight")
    c = act.random_compact(torch.Generator().manual_seed(4))
    S = torch.diag(c.double())
    got = block.scatter(act.act_compact(c, block.gather(p)), p)
    assert torch.equal(got["fc1.weight"], S @ p["fc1.weight"]) and torch.equal(got["fc2.weight"], p["fc2.weight"] @ S)
    assert torch.equal(got["fc1.bias"], S @ p["fc1.bias"]) and bool((c == -1).any())


def test_identity_of_compact_elements():
    p, block = _block(4)
    perm = HiddenPermutationAction(block, "fc1.weight", "fc2.weight")
    assert perm.is_identity(torch.arange(4)) and not perm.is_identity(torch.tensor([1, 0, 2, 3]))
    flip = SignFlipAction(block, "fc1.weight", "fc2.weight")
    assert flip.is_identity(torch.ones(4, dtype=torch.float64))
    assert not flip.is_identity(torch.tensor([1.0, -1.0, 1.0, 1.0], dtype=torch.float64))
