"""How lab 16's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "16.Q1": Rubric(items=(
        Item("A", 1, "A dense kernel loads and multiplies every stored value, zeros included: unstructured zeros "
             "change neither the shape nor the MACs and bytes, and skipping scattered zeros needs indices and "
             "irregular accesses that cost more than they save unless nearly all weights are zero",
             note="'a zero is multiplied like any number' with the reason why it cannot simply be skipped"),
        Item("B", 1, "2:4 fixes the pattern (2 of every 4): the hardware stores the 2 values and 2-bit "
             "positions, and sparse tensor cores skip the zeros regularly, doing half the multiplies: up to 2x",
             note="0.5625 of dense in float16 is welcome; 'half the weights' alone, without the fixed pattern "
                  "the hardware relies on, does not earn it"),
        Item("C", 1, "CSR stores an 8-byte (int64) column index per kept value, plus row pointers: more than the "
             "float16 value itself, so at 50 % it is larger than dense (25,688 bytes against 10,240)"),
    ), notes="Sparsity saves time only when the hardware can exploit its structure; a general format pays "
             "only at high sparsity."),
    "16.Q2": Rubric(items=(
        Item("A", 1, "T > 1 softens the teacher's distribution, so the wrong classes' probabilities (which digits "
             "look alike) become a signal; every image, labeled or not, gives the student a target, far more "
             "than the 100 labels hold",
             note="both the softening and the use of the unlabeled images; 'dark knowledge' alone is not enough"),
        Item("B", 1, "The soft term's gradients shrink as 1 / T^2; multiplying by T^2 keeps its weight against "
             "the cross-entropy the same whatever T",
             note="accept 'keeps the gradients at the same scale' as the notebook says, with 1 / T^2 or the "
                  "logits divided by T as the reason"),
    ), notes="What the temperature reveals and why the T^2 factor is there (Hinton et al., 2015)."),
}
