"""The linear-operator base: every derived quantity against the dense float64 reference."""

import numpy as np
import pytest
import torch

from paramsym.attribution import JacobianOperator, dense_jacobian, function_from_module
from paramsym.errors import ShapeError
from paramsym.linop import DenseOperator, LinearOperator, StackedOperator
from paramsym.models.mlp import mlp

D = torch.float64


class _Products(LinearOperator):
    """Only matvec/rmatvec (and shape, dtype): everything else comes from the base."""

    def __init__(self, A):
        self.A, self.shape, self.dtype = A, tuple(A.shape), A.dtype

    def matvec(self, v):
        return self.A @ v

    def rmatvec(self, u):
        return self.A.T @ u


def _check_against_dense(op, A, gen):
    v = torch.randn(A.shape[1], generator=gen, dtype=D)
    u = torch.randn(A.shape[0], generator=gen, dtype=D)
    w = torch.rand(A.shape[1], generator=gen, dtype=D) + 0.1
    torch.testing.assert_close(op.matvec(v), A @ v, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.rmatvec(u), A.T @ u, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.rows([2, 0, A.shape[0] - 1]), A[[2, 0, A.shape[0] - 1]], rtol=0, atol=1e-12)
    torch.testing.assert_close(op.dense(chunk_size=5), A, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.column_norms(chunk_size=4), A.norm(dim=0), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(op.gram(chunk_size=3), A @ A.T, rtol=0, atol=1e-11)
    torch.testing.assert_close(op.gram(chunk_size=7, weights=w), A @ torch.diag(w) @ A.T, rtol=0, atol=1e-11)
    S = op.to_scipy()
    assert S.shape == tuple(A.shape) and S.dtype == np.float64
    np.testing.assert_allclose(S.matvec(v.numpy()), (A @ v).numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(S.rmatvec(u.numpy()), (A.T @ u).numpy(), rtol=0, atol=1e-12)


def test_base_derivations_from_products_only():
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(13, 9, generator=gen, dtype=D)
    _check_against_dense(_Products(A), A, gen)


def test_dense_operator_matches_reference():
    gen = torch.Generator().manual_seed(1)
    A = torch.randn(8, 21, generator=gen, dtype=D)
    op = DenseOperator(A)
    assert op.shape == (8, 21) and op.dtype == D
    _check_against_dense(op, A, gen)
    with pytest.raises(ShapeError, match="matrix"):
        DenseOperator(torch.ones(3))


def test_jacobian_and_stacked_operators_match_dense_jacobians():
    gen = torch.Generator().manual_seed(2)
    model = mlp([2, 6, 5, 2], "tanh", generator=gen)
    fn, params = function_from_module(model)
    xs = [torch.randn(n, 2, generator=gen, dtype=D) for n in (4, 7, 3)]
    Js = [dense_jacobian(fn, params, x) for x in xs]
    ops = [JacobianOperator(fn, params, x) for x in xs]
    _check_against_dense(ops[1], Js[1], gen)
    stacked = StackedOperator(ops)
    J = torch.cat(Js)
    assert stacked.shape == tuple(J.shape)
    _check_against_dense(stacked, J, gen)
    # a stack of dense and matrix-free operators is the same operator
    _check_against_dense(StackedOperator([DenseOperator(Js[0]), ops[1], DenseOperator(Js[2])]), J, gen)
    with pytest.raises(ShapeError, match="same number of columns"):
        StackedOperator([DenseOperator(torch.ones(2, 3, dtype=D)), DenseOperator(torch.ones(2, 4, dtype=D))])
    with pytest.raises(ShapeError, match="at least one"):
        StackedOperator([])
