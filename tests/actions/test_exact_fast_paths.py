"""Exact shortcuts of the catalogue actions at real widths (issue 34): a permutation matrix applied
by indexing, and the exponential of a diagonal direction taken entrywise — each equal to the dense
computation it replaces."""

import torch

from paramsym.actions.exact import random_exp
from paramsym.actions.linear import RescalingAction
from paramsym.actions.permutation import HiddenPermutationAction, as_permutation
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
