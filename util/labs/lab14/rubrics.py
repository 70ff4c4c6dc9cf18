"""How lab 14's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "14.Q1": Rubric(items=(
        Item("A", 1, "The naive form writes the N x N scores and probabilities to global memory and reads them "
             "back; FlashAttention keeps each tile of S and P on the chip (the online softmax needs no second "
             "pass), so its traffic has no N^2 term of its own",
             note="'S and P never leave the chip' with the reason (online softmax / rescaling) earns it"),
        Item("B", 1, "Each query block reads all of K and V once: N / B passes, so the traffic of K and V falls "
             "as 1 / B",
             note="the numbers: K and V 294,912 bytes at 32, 147,456 at 64, 98,304 at 128 (two blocks of 128 "
                  "for 192 rows, not 1.5); Q, O and L are the same at every block"),
        Item("C", 1, "The block is bounded by the on-chip memory of a GPU core (shared memory, registers): the "
             "Q, K and V tiles and the accumulator must fit",
             note="also accept fewer, larger programs leaving the GPU's cores idle; 'the IO bound N^2 d^2 / S' "
                  "names the same limit"),
    ), notes="Three causes, each from the student's counts: no N x N matrix in global memory, K and V re-read "
             "once per query block, and a block size the chip's memory bounds."),
    "14.Q2": Rubric(items=(
        Item("A", 1, "The interpreter runs the programs one after another in numpy on a CPU, so its time is "
             "interpretation overhead; a GPU runs thousands of programs at once, with tensor cores. The bytes "
             "are fixed by the kernel's loads and stores, the same wherever it runs",
             note="both halves: why the time is meaningless and why the bytes are not"),
        Item("B", 1, "The prediction charges every load to HBM, with no cache: the GPU's L2 cache serves tiles "
             "that neighbouring programs read again, so fewer bytes come from HBM than counted and a "
             "memory-bound prediction is pessimistic",
             note="the plan is memory-bound (about 0.98 ms of bytes against 0.28 ms of FLOPs); a remark that the "
                  "compiled kernel may use another tile or spill registers is fine but does not replace the cache"),
    ), notes="Counting is a property of the code; timing is a property of the machine. The roofline model is a "
             "bound under its assumptions, and a cache breaks the assumption that every byte comes from HBM."),
    "14.Q3": Rubric(items=(
        Item("A", 1, "The tile needs more registers than a thread has: a 128 x 256 float32 accumulator over the "
             "128 threads of 4 warps is 256 registers a thread alone (255 the limit), so the compiler spills to "
             "local memory, traffic through the caches and HBM that the roofline never counted; and at 255 "
             "registers an SM holds only 8 of its 64 warps, too few to hide the latency of memory",
             note="both effects, each with the reason: registers -> spills (uncounted traffic) and registers -> "
                  "low occupancy (latency not hidden); '4x' need not be derived exactly"),
        Item("B", 1, "What the model of 14.9 captures: the occupancy (throughput scaled by warps / 16, so 8 warps "
             "halve it) and spilling only as exclusion; it does not price the spilled traffic or the latency "
             "itself, so it cannot say 4x",
             note="accept any honest account of a limit of the model (no cost of spills, a linear occupancy rule, "
                  "no cache, no wave quantisation) beside what it sees"),
    ), notes="Registers decide both spills and occupancy; bytes alone cannot see either. The model's occupancy "
             "factor explains part of the gap, and its exclusion of spilling tiles is a rule, not a price."),
}
