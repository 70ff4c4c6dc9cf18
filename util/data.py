"""The course's one real data set: scikit-learn's bundled handwritten digits, split the same way everywhere.

``sklearn.datasets.load_digits()`` ships inside the scikit-learn wheel (1,797 images of 8 x 8 pixels,
values 0..16, ten classes): nothing is downloaded. :func:`digits_split` scales the pixels to [0, 1]
and splits them with a seeded permutation, 1,437 images for training and 360 for testing, so every
lab that trains or evaluates on digits (labs 9 and 12) and the grader see the same sets.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing this module (the grader does, for WITHHELD) loads no torch
    import torch

TRAIN = 1437
"""Images in the training set (the rest, 360, are the test set)."""


@dataclass(frozen=True)
class DigitsSplit:
    """The digits as tensors: images ``N x 1 x 8 x 8`` (float32 in [0, 1]) and labels ``N`` (int64)."""

    x_train: torch.Tensor
    """1,437 training images."""
    y_train: torch.Tensor
    """Their labels, 0..9."""
    x_test: torch.Tensor
    """360 test images."""
    y_test: torch.Tensor
    """Their labels, 0..9."""


def digits_files() -> tuple[Path, ...]:
    """The files :func:`digits_split` reads: scikit-learn's bundled ``digits.csv.gz`` (and its description).
    A judge withholds them from a student process (``util.student_process.StudentProcess.start(...,
    withhold=("digits",))``), so code the grader re-runs cannot read the images it is evaluated on."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn.datasets")
    root = Path(spec.origin).resolve().parent  # without importing scikit-learn
    return tuple(p for p in (root / "data" / "digits.csv.gz", root / "descr" / "digits.rst") if p.is_file())


def digits_models() -> tuple[Path, ...]:
    """The models the course trained on the digits, as its export caches hold them (``util.export_cache``): every
    cached file whose name says ``digits``. A judge that evaluates a student's training withholds them with the
    images (``withhold=("digits", "digits_models")``): a process that cannot read the images could otherwise
    load weights the course trained on them, and be graded on what it did not train."""
    from util import export_cache

    return tuple(sorted(path for folder in export_cache.shared_dirs() for path in folder.iterdir()
                        if "digits" in path.name.lower() and path.is_file()))


def readable(names: tuple[str, ...]) -> list[str]:
    """Which files of the data sets ``names`` (keys of :data:`WITHHELD`) this process can read, found the way this
    process would find them (its own ``sys.path``): what a harness checks in a student process before any student
    code runs there, so that a route the sandbox left open fails the grading instead of grading on it."""
    found = []
    for name in names:
        for path in WITHHELD[name]():
            try:
                with open(path, "rb") as handle:
                    if handle.read(1):
                        found.append(str(path))
            except OSError:
                pass
    return found


WITHHELD = {"digits": digits_files, "digits_models": digits_models}
"""Data sets a judge may withhold from a student process, by name -> the files that hold them (read when the
process starts)."""


def digits_split(seed: int = 0) -> DigitsSplit:
    """The digits scaled by 1/16 and split by ``torch.randperm(1797)`` seeded with ``seed``: the first
    1,437 of the permutation train, the last 360 test. The same ``seed`` gives the same split on every
    machine (it does not depend on torch's global generator).

    >>> split = digits_split()
    >>> split.x_train.shape, split.x_test.shape
    (torch.Size([1437, 1, 8, 8]), torch.Size([360, 1, 8, 8]))
    """
    import torch
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    train, test = order[:TRAIN], order[TRAIN:]
    return DigitsSplit(images[train], labels[train], images[test], labels[test])
