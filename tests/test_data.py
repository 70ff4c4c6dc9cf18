"""The digits split labs 9 and 12 share: the bundled data, scaled, split the same way everywhere."""
from __future__ import annotations

import torch

from util.data import TRAIN, digits_split
from util.models import build_model


def test_the_split_is_whole_disjoint_scaled_and_seeded():
    split, again, other = digits_split(), digits_split(0), digits_split(1)
    assert split.x_train.shape == (TRAIN, 1, 8, 8) and split.x_test.shape == (1797 - TRAIN, 1, 8, 8)
    assert split.x_train.dtype == torch.float32 and split.y_train.dtype == torch.int64
    assert 0.0 == float(split.x_train.min()) and float(split.x_train.max()) == 1.0
    assert torch.equal(split.x_test, again.x_test) and torch.equal(split.y_train, again.y_train)
    assert not torch.equal(split.y_test, other.y_test)
    def every(s):  # all 1,797 images, in a canonical order
        return torch.unique(torch.cat([s.x_train, s.x_test]).flatten(1), dim=0)
    assert torch.equal(every(split), every(other))  # the same images, split otherwise
    assert sorted(torch.bincount(torch.cat([split.y_train, split.y_test])).tolist()) == [174, 177, 178, 179, 180,
                                                                                        181, 181, 182, 182, 183]


def test_digits_cnn_has_the_stated_parameters():
    model = build_model("digits_cnn")
    assert sum(p.numel() for p in model.parameters()) == 19_258
    weights = [m.weight.numel() for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    assert sum(weights) == 19_088
    assert model(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
