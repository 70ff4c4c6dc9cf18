"""How lab 5's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "5.Q1": Rubric(items=(
        Item("A", 2, "Float32: the fold's difference (about 1e-6) is as large as float32's own error against "
             "float64, so the fold is as exact as the format"),
        Item("B", 2, "Float16: the fold's difference (about 1e-3) is the size of float16's own rounding, no "
             "worse than the format"),
        Item("C", 2, "The tolerance follows the dtype: a multiple of its own error or epsilon, never bitwise "
             "or a fixed tiny number",
             note="any dtype-relative tolerance with a reason"),
    )),
}
