"""Matrix Lie groups: sampling of signed exponential products ([Discovery] §5, eq. 6), group elements
against ``scipy.linalg.expm`` products, inverse and composition, generator normalisation."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.linalg
import scipy.stats
import torch

from paramsym.errors import GroupError, ShapeError
from paramsym.groups.lie import GroupSamples, MatrixLieGroup, bracket, frobenius_orthonormal


def _group(s=3, r=4, seed=0, dtype=torch.float64):
    return MatrixLieGroup(s, r, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _expm_product(gens: np.ndarray, coeffs: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Independent reference: Π_j expm(t_j h_{i_j}), factor 0 applied first (rightmost)."""
    g = np.eye(gens.shape[-1])
    for t, i in zip(coeffs, index):
        g = scipy.linalg.expm(t * gens[i]) @ g
    return g


@pytest.mark.parametrize("rho,max_factors", [(0.5, 3), (1.2, 1), (0.1, 8)])
def test_total_length_and_product_lengths(rho, max_factors):
    group = _group()
    gen = torch.Generator().manual_seed(1)
    n = 20_000
    s = group.sample(n, rho, max_factors, generator=gen)
    assert s.coeffs.shape == (n, max_factors) and s.index.shape == (n, max_factors)
    total = s.length
    assert float(total.min()) >= 0.2 * rho * (1 - 1e-12) and float(total.max()) <= rho * (1 + 1e-12)
    # Σ|t_j| is uniform on [0.2ρ, ρ] (Kolmogorov–Smirnov against the uniform law)
    u = ((total / rho - 0.2) / 0.8).numpy()
    assert scipy.stats.kstest(u, "uniform").pvalue > 1e-3
    lengths = (s.coeffs != 0).sum(-1)
    assert int(lengths.min()) >= 1 and int(lengths.max()) <= max_factors
    counts = torch.bincount(lengths, minlength=max_factors + 1)[1:].double() / n
    assert torch.allclose(counts, torch.full_like(counts, 1 / max_factors), atol=0.02)  # uniform in 1..m
    # inactive (padded) factors have zero coefficient and index 0; active ones are signed
    active = s.coeffs != 0
    assert bool((s.index[~active] == 0).all())
    pos = float((s.coeffs[active] > 0).double().mean())
    assert 0.47 < pos < 0.53
    idx = torch.bincount(s.index[active], minlength=4).double()
    assert float(idx.min() / idx.max()) > 0.9  # generator indices uniform


def test_exact_factors_and_generator_determinism():
    group = _group()
    s = group.sample(500, 0.5, exact_factors=4, generator=torch.Generator().manual_seed(3))
    assert bool(((s.coeffs != 0).sum(-1) == 4).all())
    again = group.sample(500, 0.5, exact_factors=4, generator=torch.Generator().manual_seed(3))
    assert torch.equal(s.coeffs, again.coeffs) and torch.equal(s.index, again.index)


def test_matrices_match_scipy_expm_products():
    group = _group()
    s = group.sample(20, 0.9, 4, generator=torch.Generator().manual_seed(2))
    g = group.matrices(s).detach().numpy()
    gens = group.generators().detach().numpy()
    for k in range(20):
        ref = _expm_product(gens, s.coeffs[k].numpy(), s.index[k].numpy())
        assert np.allclose(g[k], ref, rtol=1e-12, atol=1e-13)


def test_padding_factors_skipped_keep_values_and_generator_gradients():
    """Products shorter than max_factors are padded with t = 0 factors, which ``matrices`` does not
    exponentiate (exp(0) = I): the elements and the generators' gradient equal those of the plain
    product of every factor's exponential."""
    group = _group(s=2, r=3)
    s = group.sample(40, 0.9, 5, generator=torch.Generator().manual_seed(4))
    assert bool((s.coeffs == 0).any()) and bool((s.coeffs != 0).any())  # padding present
    w = torch.randn(40, 2, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    grads = []
    for skip in (True, False):
        group.raw.grad = None
        if skip:
            g = group.matrices(s)
        else:
            f = torch.linalg.matrix_exp(s.coeffs[..., None, None] * group.generators()[s.index])
            g = f[:, 0]
            for j in range(1, f.shape[1]):
                g = f[:, j] @ g
        (g * w).sum().backward()
        grads.append((g.detach(), group.raw.grad.clone()))
    (g_skip, d_skip), (g_all, d_all) = grads
    torch.testing.assert_close(g_skip, g_all, rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(d_skip, d_all, rtol=1e-12, atol=1e-14)
    assert float(d_all.norm()) > 0


def test_inverse_and_compose():
    group = _group()
    gen = torch.Generator().manual_seed(4)
    s1 = group.sample(200, 0.8, 4, generator=gen)
    s2 = group.sample(200, 0.8, 3, generator=gen)
    g1, g2 = group.matrices(s1), group.matrices(s2)
    eye = torch.eye(3, dtype=torch.float64).expand(200, 3, 3)
    ginv = group.matrices(s1.inverse())
    assert torch.allclose(ginv @ g1, eye, atol=1e-13) and torch.allclose(g1 @ ginv, eye, atol=1e-13)
    assert torch.allclose(ginv, torch.linalg.inv(g1), atol=1e-12)
    assert torch.allclose(group.matrices(s2.compose(s1)), g2 @ g1, atol=1e-13)
    # scale and factor: exp(t h)^2 = exp(2t h) (one-parameter subgroups)
    one = group.one_parameter(torch.tensor([0.3, -0.7]), index=2)
    assert torch.allclose(group.matrices(one.scale(2.0)), group.matrices(one) @ group.matrices(one), atol=1e-13)
    first = group.matrices(s1.factor(0))
    assert torch.allclose(first, torch.linalg.matrix_exp(s1.coeffs[:, :1, None] * group.generators()[s1.index[:, 0]]), atol=1e-14)


def test_supplied_generators_are_frobenius_orthonormal_and_span_the_input():
    raw = torch.randn(3, 3, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    group = MatrixLieGroup.supplied(raw)
    h = group.generators().reshape(3, 9)
    assert torch.allclose(h @ h.T, torch.eye(3, dtype=torch.float64), atol=1e-13)
    # same span: projecting the input onto the basis reproduces it
    flat = raw.reshape(3, 9)
    assert torch.allclose((flat @ h.T) @ h, flat, atol=1e-12)
    assert not group.raw.requires_grad and not list(group.parameters())
    # an orthonormal input (the E_ij basis of gl(2)) is kept as given, signs included
    basis = torch.eye(4, dtype=torch.float64).reshape(4, 2, 2)
    assert torch.equal(MatrixLieGroup.supplied(basis).generators(), basis)
    assert torch.equal(frobenius_orthonormal(-basis), -basis)
    # a single supplied generator is normalised
    one = MatrixLieGroup.supplied(torch.tensor([[[0.0, -2.0], [2.0, 0.0]]]))
    assert float(one.generators().norm()) == pytest.approx(1.0)


def test_learned_generators_are_normalised_and_trainable():
    group = _group(s=2, r=3, dtype=torch.float32)
    h = group.generators()
    assert torch.allclose(h.reshape(3, -1).norm(dim=-1), torch.ones(3), atol=1e-6)
    h.sum().backward()
    assert group.raw.grad is not None


def test_invalid_groups_raise_named_errors():
    with pytest.raises(GroupError, match="linearly dependent"):
        MatrixLieGroup.supplied(torch.stack([torch.eye(2), 2 * torch.eye(2)]))
    with pytest.raises(GroupError, match="nonzero"):
        MatrixLieGroup(2, 1, generators=torch.zeros(1, 2, 2))
    with pytest.raises(ShapeError, match=r"\(r, s, s\)"):
        MatrixLieGroup(2, 2, generators=torch.zeros(1, 2, 2))
    with pytest.raises(GroupError, match="non-finite"):
        MatrixLieGroup(2, 1, generators=torch.full((1, 2, 2), float("nan")))
    with pytest.raises(GroupError, match="rho"):
        _group().sample(3, 0.0)
    with pytest.raises(GroupError, match="factors"):
        _group().sample(3, 0.5, 0)


def test_bracket():
    a = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    b = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    assert torch.equal(bracket(a, b), torch.tensor([[1.0, 0.0], [0.0, -1.0]]))


def test_sampling_is_vectorised_100k_samples(monkeypatch):
    """10⁵ samples (3 × 3 matrices, up to 3 factors as in the training recipes): one batched
    ``matrix_exp`` call for all samples' factors (the t = 0 padding of shorter products skipped),
    whatever n. The time bound is generous
    (a loaded 2-core machine); a Python loop per sample would take far longer."""
    group = _group(s=3, r=4)
    calls = []
    real = torch.linalg.matrix_exp

    def counting(x):
        calls.append(tuple(x.shape))
        return real(x)

    monkeypatch.setattr(torch.linalg, "matrix_exp", counting)
    gen = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    with torch.no_grad():
        s = group.sample(100_000, 0.5, 3, generator=gen)
        g = group.matrices(s)
    elapsed = time.perf_counter() - t0
    assert calls == [(int((s.coeffs != 0).sum()), 3, 3)] and 100_000 < calls[0][0] < 300_000
    assert g.shape == (100_000, 3, 3) and bool(torch.isfinite(g).all())
    assert isinstance(s, GroupSamples) and len(s) == 100_000
    assert elapsed < 10.0, f"sampling 1e5 elements took {elapsed:.2f} s"
