"""The stated GPU machine model lab 14 predicts time with (lab 11's roofline, one level down).

A machine model is a dict of three numbers: ``bandwidth`` (bytes per second between global memory, the HBM,
and the chip), ``flops`` (FLOP/s of the matrix units for float32 inputs: a ``tl.dot`` runs there, in TF32 on
these GPUs) and ``on_chip_bytes`` (fast memory one program's tiles may use: shared memory per SM), with a
``name``. Predicted time is the roofline's: ``max(FLOPs / flops, bytes / bandwidth)``, every byte of traffic
counted (no cache between the chip and global memory), matrix-product FLOPs only (2 per multiply-add).
"""
from __future__ import annotations

H100 = {"name": "H100-like", "bandwidth": 3.35e12, "flops": 495e12, "on_chip_bytes": 228 * 1024}
"""An NVIDIA H100 SXM as the lab models it: HBM3 at 3.35 TB/s, 495 TFLOP/s of dense TF32 on the tensor cores,
228 KiB of shared memory per SM. Ridge: 495e12 / 3.35e12 = 148 FLOP per byte."""

TOY = {"name": "toy", "bandwidth": 1e9, "flops": 1e12, "on_chip_bytes": 24 * 1024}
"""A machine small enough to plan for by hand (the notebook's example for task 14.6): 1 GB/s, 1 TFLOP/s,
24 KiB on chip."""


def ridge(machine: dict) -> float:
    """FLOPs per byte above which the machine is compute-bound: ``flops / bandwidth``."""
    return machine["flops"] / machine["bandwidth"]


def roof(machine: dict, intensity: float) -> float:
    """FLOP/s attainable at ``intensity`` FLOPs per byte: ``min(flops, bandwidth x intensity)``."""
    return min(machine["flops"], machine["bandwidth"] * intensity)

H100_FP16 = {"name": "H100-like, 16-bit inputs", "bandwidth": 3.35e12, "flops": 989e12, "on_chip_bytes": 228 * 1024}
"""The same H100 for float16 and bfloat16 inputs (task 14.9): 989 TFLOP/s of dense 16-bit products on the tensor
cores (twice TF32's), the same HBM3. Ridge: 989e12 / 3.35e12 = 295 FLOP per byte."""
