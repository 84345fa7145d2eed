"""Dense and matrix-free Jacobians against independent references (autograd loop, finite differences)."""

import pytest
import torch

from paramsym.attribution import (
    JacobianOperator,
    ParamLayout,
    dense_jacobian,
    finite_difference_matvec,
    function_from_module,
)
from paramsym.errors import NonFiniteError, ParameterNameError, ShapeError
from paramsym.models.mlp import layer_names, mlp


def _autograd_loop_jacobian(model, names, x):
    """Reference: one torch.autograd.grad call per output entry (no torch.func)."""
    m = model.double()
    params = dict(m.named_parameters())
    y = m(x.double()).reshape(-1)
    rows = []
    for k in range(y.numel()):
        g = torch.autograd.grad(y[k], [params[n] for n in names], retain_graph=True)
        rows.append(torch.cat([t.reshape(-1) for t in g]))
    return torch.stack(rows)


@pytest.fixture
def small():
    gen = torch.Generator().manual_seed(1)
    model = mlp([3, 7, 5, 2], "tanh", generator=gen)
    x = torch.randn(11, 3, generator=gen, dtype=torch.float64)
    return model, x, gen


def test_dense_matches_autograd_loop(small):
    model, x, _ = small
    fn, params = function_from_module(model)
    J = dense_jacobian(fn, params, x, chunk_size=4)
    ref = _autograd_loop_jacobian(model, list(params), x)
    assert J.shape == (11 * 2, sum(p.numel() for p in model.parameters()))
    assert J.dtype == torch.float64
    torch.testing.assert_close(J, ref, rtol=0, atol=1e-12)


def test_chunking_does_not_change_result(small):
    model, x, _ = small
    fn, params = function_from_module(model)
    J1 = dense_jacobian(fn, params, x, chunk_size=None)
    J2 = dense_jacobian(fn, params, x, chunk_size=3)
    torch.testing.assert_close(J1, J2, rtol=0, atol=1e-14)


def test_matrix_free_products_match_dense_and_finite_differences(small):
    model, x, gen = small
    fn, params = function_from_module(model)
    J = dense_jacobian(fn, params, x)
    op = JacobianOperator(fn, params, x)
    assert op.shape == tuple(J.shape)
    v = torch.randn(J.shape[1], generator=gen, dtype=torch.float64)
    u = torch.randn(J.shape[0], generator=gen, dtype=torch.float64)
    torch.testing.assert_close(op.matvec(v), J @ v, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.rmatvec(u), J.T @ u, rtol=0, atol=1e-12)
    fd = finite_difference_matvec(fn, params, x, v, eps=1e-5)
    # central differences: truncation error O(eps^2) ~ 1e-10 relative to O(1) products
    assert float((fd - J @ v).norm() / (J @ v).norm()) < 1e-8
    torch.testing.assert_close(op.dense(chunk_size=5), J, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.column_norms(chunk_size=5), J.norm(dim=0), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(op.gram(chunk_size=4), J @ J.T, rtol=0, atol=1e-11)
    A = op.to_scipy()
    torch.testing.assert_close(torch.from_numpy(A.matvec(v.numpy())), J @ v, rtol=0, atol=1e-12)
    torch.testing.assert_close(torch.from_numpy(A.rmatvec(u.numpy())), J.T @ u, rtol=0, atol=1e-12)


def test_trainable_selection_freezes_the_rest(small):
    model, x, _ = small
    first = layer_names(model, [1])
    fn_all, p_all = function_from_module(model)
    fn_first, p_first = function_from_module(model, first)
    assert list(p_first) == ["fc1.weight", "fc1.bias"]
    J_all = dense_jacobian(fn_all, p_all, x)
    J_first = dense_jacobian(fn_first, p_first, x)
    lay = ParamLayout.from_params(p_all)
    cols = torch.cat([torch.arange(lay.slice(n).start, lay.slice(n).stop) for n in first])
    torch.testing.assert_close(J_first, J_all[:, cols], rtol=0, atol=1e-13)
    # a predicate selects the same columns
    fn_pred, p_pred = function_from_module(model, lambda n: n.startswith("fc1."))
    assert list(p_pred) == first
    # the caller's module is not modified (dtype, values)
    assert model.fc1.weight.dtype == torch.float64


def test_layout_round_trip_and_owner(small):
    model, _, _ = small
    _, params = function_from_module(model)
    lay = ParamLayout.from_params(params)
    flat = lay.flatten(params)
    back = lay.unflatten(flat)
    for k in params:
        assert torch.equal(back[k], params[k])
    name, j = lay.owner(lay.slice("fc2.bias").start + 3)
    assert (name, j) == ("fc2.bias", 3)
    with pytest.raises(ShapeError):
        lay.unflatten(flat[:-1])


def test_bad_inputs_have_named_errors(small):
    model, x, _ = small
    with pytest.raises(ParameterNameError, match="Available parameters"):
        function_from_module(model, ["fc9.weight"])
    fn, params = function_from_module(model)
    with pytest.raises(ShapeError, match="empty"):
        dense_jacobian(fn, params, x[:0])
    with pytest.raises(ShapeError, match="empty"):
        JacobianOperator(fn, params, x[:0])
    bad = x.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(NonFiniteError):
        dense_jacobian(fn, params, bad)
    broken = {k: v.clone() for k, v in params.items()}
    broken["fc1.weight"][0, 0] = float("nan")  # a diverged parameter: the outputs become NaN
    with pytest.raises(NonFiniteError, match="non-finite"):
        JacobianOperator(fn, broken, x)
    with pytest.raises(NonFiniteError, match="non-finite"):
        dense_jacobian(fn, broken, x)
