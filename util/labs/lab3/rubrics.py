"""How lab 3's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "3.Q1": Rubric(items=(
        Item("A", 1, "About 14,000 MatMuls (9,216 + 4,096 + 1,024 at batch 1)",
             note="within 10 %; the count of all nodes (about 14,800) also earns it"),
        Item("B", 1, "Per-node overhead on every run: a kernel call, an allocated output and the weight "
             "sliced again, large next to a 64x64x64 product"),
        Item("C", 1, "Session creation checks, plans and optimises every node, so its time grows with the "
             "node count"),
    )),
    "3.Q2": Rubric(items=(
        Item("A", 1, "24 padded columns of 1,024 (about 2.3 %)"),
        Item("B", 1, "The padding is built once into the pre-tiled weight and computed inside one batched "
             "MatMul: a few percent of MACs, no extra nodes or copies"),
    )),
}
