"""How lab 15's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "15.Q1": Rubric(items=(
        Item("A", 1, "A contiguous cache reserves each request's longest possible length up front (it cannot "
             "grow a region later), and the slots never written are wasted for the request's whole life"),
        Item("B", 1, "A paged cache takes a block only when the sequence needs one: only the last block is partly "
             "empty, so it wastes less than one block (at most block_size - 1 slots) per sequence",
             note="'less than a block per sequence' earns it; 505 tokens in 560 slots is the example"),
        Item("C", 1, "Sequences forked from one prompt share its full blocks (reference counts) and copy only "
             "the block the prompt ends in, so the shared prefix is stored once though each sequence counts it",
             note="the answer must say why the paged bytes fall below the tokens needed: shared blocks stored "
                  "once; copy-on-write named or described"),
    ), notes="Internal fragmentation: reserved-but-unused slots (contiguous) against less than a block per "
             "sequence (paged), and prefix sharing beating even the tokens' own count."),
    "15.Q2": Rubric(items=(
        Item("A", 1, "A decode step is memory-bound: its cost is reading the target's weights, read once for "
             "k + 1 positions as for one, so checking k proposals costs about one step"),
        Item("B", 1, "A call gives the accepted proposals plus one token of the target's: between 1 and k + 1, "
             "more when the draft agrees more often",
             note="the expected (1 - alpha^(k+1)) / (1 - alpha) is welcome, not needed"),
        Item("C", 1, "It pays when the tokens a call gives exceed its cost, 1 + c k target forwards: a cheap draft "
             "that agrees often; with noise 0.05 the draft's proposals cost more than they save",
             note="the numbers (20.6 against 43.2 target forwards for 40 tokens) or the same reasoning in words; "
                  "'the tokens are always the target's' alone does not earn it"),
    ), notes="Why verification is nearly free (bandwidth, not FLOPs), what a call yields, and the break-even "
             "between acceptance and the draft's cost."),
}
