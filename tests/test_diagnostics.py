"""Cosines, perpendicular parts and their second moments, by hand."""

import math

import pytest
import torch

from sandbox.diagnostics import cosine, misalignment, perpendicular, perpendicular_second_moment


def test_cosine_and_misalignment():
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0])
    assert cosine(a, b).item() == pytest.approx(1 / math.sqrt(2))
    assert misalignment(a, a).item() == pytest.approx(0.0)
    assert cosine(torch.zeros(2), b).item() == 0.0  # a zero vector is orthogonal to everything
    pop = cosine(torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([[3.0, 0.0], [1.0, 0.0]]))
    assert pop.tolist() == [1.0, 0.0]


def test_perpendicular_and_second_moment():
    d = torch.tensor([0.0, 2.0])
    g = torch.tensor([[3.0, 1.0], [-1.0, 5.0]])  # perpendicular parts (3, 0) and (−1, 0)
    assert torch.allclose(perpendicular(g, d), torch.tensor([[3.0, 0.0], [-1.0, 0.0]]))
    assert perpendicular_second_moment(g, d).item() == pytest.approx((9 + 1) / 2)
    assert perpendicular_second_moment(g, d, torch.tensor([0.25, 0.75])).item() == pytest.approx(0.25 * 9 + 0.75 * 1)
