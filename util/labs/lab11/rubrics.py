"""How lab 11's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "11.Q1": Rubric(items=(
        Item("A", 1, "Early convolutions are compute-bound and run near the machine's matrix-product speed: a "
             "small factor from the model"),
        Item("B", 1, "layer4 at batch 1 streams large weights through a skinny product (few output columns) "
             "that is neither compute- nor bandwidth-efficient"),
        Item("C", 1, "fc's time is per-call overhead; the roofline ignores overhead and kernel efficiency, so "
             "it is a lower bound"),
    )),
    "11.Q2": Rubric(items=(
        Item("A", 1, "layer4.1.conv1's bytes are mostly weights, read once per call: batching multiplies its "
             "MACs for about the same bytes"),
        Item("B", 1, "layer1.0.conv1's bytes are mostly activations, which grow with the batch like its MACs: "
             "its intensity hardly changes"),
        Item("C", 1, "A depthwise convolution has few MACs per activation element: its intensity's limit "
             "(activations only) lies below the ridge"),
    )),
}
