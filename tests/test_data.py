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


def test_the_models_trained_on_the_digits_are_withheld_by_what_the_caches_name(tmp_path, monkeypatch):
    """``WITHHELD["digits_models"]`` lists every export-cache file whose name says it holds a model trained on the
    digits, in each shared cache, when asked (the grader asks as it starts a student process), and nothing else; the
    sandbox then reads them as unreadable."""
    import subprocess
    import sys

    from grader.execute import confinement, sandbox
    from util.data import WITHHELD

    caches = {kind: tmp_path / kind for kind in ("onnx", "torchscript")}
    for kind, folder in caches.items():
        folder.mkdir()
        monkeypatch.setenv(f"COURSE_{kind.upper()}_CACHE", str(folder))
    trained = [caches["onnx"] / "lab9_digits_cnn_seed0_1234.npz", caches["torchscript"] / "Digits_int8_abcd.pt"]
    other = caches["onnx"] / "resnet18_bnstats_folded_1x3x64x64_op17_ae2e.onnx"
    for path in [*trained, other]:
        path.write_bytes(b"x" * 100)
    assert WITHHELD["digits_models"]() == tuple(sorted(trained))
    later = caches["onnx"] / "lab9_digits_int8_9999.onnx"
    later.write_bytes(b"x" * 100)
    assert later in WITHHELD["digits_models"]()  # read when asked, not when imported
    if not confinement.available():
        return
    for name in (".tmp", ".shm"):
        (tmp_path / "scratch" / name).mkdir(parents=True)
    code = ("import sys\ndef size(p):\n    try:\n        return len(open(p, 'rb').read())\n    except OSError:\n"
            "        return -1\nprint(*[size(p) for p in sys.argv[1:]])")
    done = subprocess.run(sandbox.bwrap_args(tmp_path / "scratch", withhold=WITHHELD["digits_models"]())
                          + [sys.executable, "-c", code, *map(str, [*trained, later, other])],
                          capture_output=True, text=True, timeout=60)
    assert [int(n) for n in done.stdout.split()] == [-1, -1, -1, 100], done.stderr
