"""How lab 7's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "7.Q1": Rubric(items=(
        Item("A", 1, "The sum of squares overflows float16 (above 65,504) to inf, so sqrt gives inf and the "
             "division gives 0"),
        Item("B", 1, "onnxruntime's CPU provider computes these float16 nodes in float32 (Casts around them, "
             "then removed), so nothing overflows"),
        Item("C", 1, "The emulator rounds every stored value through float16 (storage float16, compute "
             "float32), as real float16 hardware would"),
    )),
    "7.Q2": Rubric(items=(
        Item("A", 1, "The large value must stay float32 from the sum through the square root: with only one "
             "of them excluded it is still stored in float16 and overflows"),
        Item("B", 1, "The list depends on this graph and these inputs; op lists are a rule for every network"),
    )),
}
