"""How lab 9's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "9.Q1": Rubric(items=(
        Item("A", 1, "Rounding to the scale's grid and clipping to the calibrated range (saturation) for "
             "inputs and activations"),
        Item("B", 1, "Rounded int8 weights and the fixed-point requantisation (multiplier and shift)"),
        Item("C", 1, "Only images whose two best logits are nearly tied flip: the errors are small next to "
             "most margins"),
    )),
    "9.Q2": Rubric(items=(
        Item("A", 1, "The per-tensor scale covers the wide channel, so its step exceeds the other channels' "
             "values, which round to zero"),
        Item("B", 1, "The damaged tensor stays quantised while its producer (conv1) or its consumer (conv2) "
             "is int8, so both must be excluded"),
    )),
}
