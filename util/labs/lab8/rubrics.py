"""How lab 8's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "8.Q1": Rubric(items=(
        Item("A", 1, "Greedy best fit fragments: a tensor in a larger buffer wastes the rest, and a later "
             "larger tensor needs a new buffer"),
        Item("B", 1, "Writing over an input still being read corrupts values the operator has yet to read (a "
             "matrix product reads each element many times)"),
    )),
    "8.Q2": Rubric(items=(
        Item("A", 1, "The naive inner loop strides B by N floats: a new cache line for every multiply-add; a "
             "row-wise order reads consecutive memory"),
        Item("B", 1, "Independent inner iterations let the compiler vectorise (SIMD); the naive single-sum "
             "loop cannot be"),
        Item("C", 1, "The grader pins the kernel to one CPU with one thread, so threads cannot help",
             note="blocking for cache reuse may earn this point instead if the answer used it"),
    )),
}
