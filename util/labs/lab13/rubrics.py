"""How lab 13's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "13.Q1": Rubric(items=(
        Item("A", 1, "The tensor is cut into p chunks; each phase (reduce-scatter, then all-gather) takes p - 1 "
             "steps of one chunk of n / p: 2 (p - 1) chunks, 2 (p - 1) / p of the tensor",
             note="the uneven chunks of 3 ranks (334, 333, 333) explain 5,332 and 5,336; not required"),
        Item("B", 1, "2 (p - 1) / p is below 2 and tends to 2: a rank's bytes hardly depend on the number of "
             "ranks, and every rank sends and receives at once, so no link carries more than its share"),
        Item("C", 1, "The central rank would receive p - 1 tensors and send p - 1 back: its traffic grows with "
             "p, and it is the bottleneck",
             note="accept '(p - 1) tensors each way' or 2 (p - 1) x 4,000 bytes; a remark that the ring pays "
                  "2 (p - 1) latencies (13.2) is welcome but not needed"),
    ), notes="After why the ring's share is 2 (p - 1) / p: the two phases counted chunk by chunk, a per-rank cost "
             "that stays flat in p, against a central rank whose cost grows with p."),
    "13.Q2": Rubric(items=(
        Item("A", 1, "Stage 1 shards Adam's state, stage 2 also the gradients, stage 3 also the weights: 16 bytes "
             "a parameter become 4 + 4 + 8 / p, 4 + 12 / p and 16 / p; stage 1 still needs about 13 GiB, stage 2 "
             "about 8 GiB",
             note="the GiB figures may be rounded; the three shardings in order are the point"),
        Item("B", 1, "Stages 1 and 2 move what data parallelism moves (a reduce-scatter of the gradients and an "
             "all-gather of the parameters are one all-reduce's bytes); stage 3 also gathers each layer's "
             "weights before it runs, forward and backward: about 1.5 times the bytes, waited for during the step",
             note="'no extra communication for stages 1-2, more for stage 3 because weights are gathered per "
                  "layer' earns the item"),
    ), notes="ZeRO trades memory for communication only at stage 3: the first two stages cost the same bytes as "
             "an all-reduce."),
}
