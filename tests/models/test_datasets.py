"""The offline datasets: sizes, standardisation with training statistics, seeded splits."""

import pytest
import torch

from paramsym.errors import ConfigError
from paramsym.models.datasets import digits, modular_addition


def test_digits_split_and_standardisation():
    s = digits(seed=0)
    assert s.x_train.shape == (1438, 64) and s.x_test.shape == (359, 64)
    assert s.num_classes == 10
    mean = s.x_train.double().mean(0)
    assert mean.abs().max() < 1e-5
    std = s.x_train.double().std(0)
    # constant pixels stay 0; the others have unit standard deviation on the training half
    varying = std > 1e-6
    assert varying.sum() >= 60 and torch.allclose(std[varying], torch.ones(int(varying.sum()), dtype=std.dtype), atol=1e-4)
    assert torch.equal(digits(seed=0).y_test, s.y_test)
    assert not torch.equal(digits(seed=1).y_test, s.y_test)


def test_modular_addition_labels():
    s = modular_addition(p=7, seed=3, train_fraction=0.5)
    x = torch.cat([s.x_train, s.x_test])
    y = torch.cat([s.y_train, s.y_test])
    assert len(y) == 49 and torch.equal(y, (x[:, 0] + x[:, 1]) % 7)
    assert torch.all(x[:, 2] == 7)
    assert len({tuple(r.tolist()) for r in x}) == 49


@pytest.mark.parametrize("kwargs", [{"train_fraction": 1.0}, {"seed": -1}])
def test_bad_split_is_named(kwargs):
    with pytest.raises(ConfigError):
        digits(**kwargs)
