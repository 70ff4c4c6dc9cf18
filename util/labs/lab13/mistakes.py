"""Lab 13 example submissions: the solution with one realistic mistake each.

Each passes what the notebook shows by hand where the mistake does not bite, and fails where the grader's
own run or count sees it: a gradient average that is a sum (the gradients are world times too large), a ring
that ships every partial sum at every step of its reduce-scatter (correct sums, world times that phase's bytes on
the wire), ZeRO-2 charged
as ZeRO-1 (the gradients counted whole), 1F1B flushed like GPipe (its bubble counted as GPipe's), an
"overlapped" data-parallel step that starts its buckets' all-reduces only once the backward pass is over (right
gradients, buckets and bytes; the grader's hold on the first layer is never released), and mixed-precision ZeRO
that counts the float32 master weights twice.
"""
from util.contract import ANSWER, Mistake

MISTAKES = (
    Mistake(
        name="allreduce_sum_not_mean",
        description="All-reduces each bucket of gradients and keeps the sum: dist.all_reduce adds the ranks' "
                    "gradients, and data parallelism needs their mean, so every gradient is world times too large.",
        replacements=(("        flat /= world" + " " * 22 + "# all_reduce sums: the mean needs a division\n", ""),),
        expected_failures={"13.3": (ANSWER, "2 ranks, MLP 12-20-7, batch 16, cap 200 bytes: result",
                                    "4 ranks, MLP 10-33-17-5, batch 24, cap 2,000 bytes: result")},
        variants=(
            (  # the division written out of place, its result dropped: the sum is copied back
                ("        flat /= world" + " " * 22 + "# all_reduce sums: the mean needs a division\n",
                 "        flat.div(world)\n"),
            ),
            (  # another order: the gradients divided before the copy back, which overwrites them with the sum
                ("        dist.all_reduce(flat)\n        flat /= world" + " " * 22
                 + "# all_reduce sums: the mean needs a division\n",
                 "        for i in bucket:\n            ready[i].grad /= world\n        dist.all_reduce(flat)\n"),
            ),
        ),
    ),
    Mistake(
        name="ring_sends_whole_tensor",
        description="In the reduce-scatter, sends its whole list of partial sums at every step and lets the "
                    "receiver take the chunk it needs: the sums are right, the reduce-scatter's bytes are world "
                    "times the ring's.",
        replacements=(("        acc[into] = acc[into] + ring_step(acc[out], acc[into], rank, world)\n",
                       "        whole = ring_step(torch.cat(acc), x, rank, world)\n"
                       "        acc[into] = acc[into] + torch.tensor_split(whole, world)[into]\n"),),
        expected_failures={"13.1": (ANSWER, "2 ranks, 1,000 floats: bytes", "3 ranks, 10 integer-valued floats (chunks "
                                    "4, 3, 3): bytes", "4 ranks, 4,097 floats (one chunk longer): bytes")},
        variants=(
            (  # the chunk sent in a zero tensor of the whole length: the receiver takes its chunk out of it
                ("        acc[into] = acc[into] + ring_step(acc[out], acc[into], rank, world)\n",
                 "        padded = torch.zeros(x.numel(), dtype=x.dtype)\n"
                 "        torch.tensor_split(padded, world)[out].copy_(acc[out])\n"
                 "        whole = ring_step(padded, padded, rank, world)\n"
                 "        acc[into] = acc[into] + torch.tensor_split(whole, world)[into]\n"),
            ),
            (  # the whole list with blocking dist.send and dist.recv, even ranks sending first (no deadlock)
                ("        acc[into] = acc[into] + ring_step(acc[out], acc[into], rank, world)\n",
                 "        whole, mine = torch.empty(x.numel(), dtype=x.dtype), torch.cat(acc)\n"
                 "        if rank % 2 == 0:\n"
                 "            dist.send(mine, (rank + 1) % world)\n"
                 "            dist.recv(whole, (rank - 1) % world)\n"
                 "        else:\n"
                 "            dist.recv(whole, (rank - 1) % world)\n"
                 "            dist.send(mine, (rank + 1) % world)\n"
                 "        acc[into] = acc[into] + torch.tensor_split(whole, world)[into]\n"),
            ),
        ),
    ),
    Mistake(
        name="zero2_as_zero1",
        description="Charges ZeRO stage 2 as stage 1: only the optimizer state is sharded, the gradients are "
                    "counted whole on every rank.",
        replacements=(('"grads": stage >= 2, "weights"', '"grads": stage >= 3, "weights"'),),
        expected_failures={"13.4": (ANSWER, "19,258 parameters, 4 ranks, stage 2", "546 parameters, 5 ranks, stage 2",
                                    "10 parameters, 4 ranks, stage 2")},
        variants=(
            (  # stage 2 priced as stage 1 before the table is read
                ('    sharded = {"optimizer_state": stage >= 1, "grads": stage >= 2, "weights": stage >= 3}\n',
                 '    if stage == 2:\n        stage = 1\n'
                 '    sharded = {"optimizer_state": stage >= 1, "grads": stage >= 2, "weights": stage >= 3}\n'),
            ),
            (  # the rule kept, then the gradients unsharded again at stage 2 (all-reduced whole)
                ('    per_element = {"weights": 4, "grads": 4, "optimizer_state": 8}\n',
                 '    per_element = {"weights": 4, "grads": 4, "optimizer_state": 8}\n'
                 '    if stage == 2:\n        sharded["grads"] = False\n'),
            ),
        ),
    ),
    Mistake(
        name="one_f_one_b_flushed",
        description="Runs 1F1B in rounds of at most `limit` micro-batches with a flush after each, as GPipe must: "
                    "1F1B holds at most `stages` micro-batches anyway, so it needs no flush, and its bubble is counted "
                    "as GPipe's.",
        replacements=(("rounds = [range(microbatches)]      # 1F1B holds at most `stages`: one round, no flush",
                       "rounds = [range(s, min(s + limit, microbatches)) for s in range(0, microbatches, limit)]"),),
        expected_failures={"13.7": (ANSWER, "1f1b, 4 stages, 8 micro-batches, at most 4 held",
                                    "1f1b, 3 stages, 10 micro-batches, at most 3 held")},
        variants=(
            (  # flushed every `stages` micro-batches (what 1F1B holds at most) instead of every `limit`
                ("rounds = [range(microbatches)]      # 1F1B holds at most `stages`: one round, no flush",
                 "rounds = [range(s, min(s + stages, microbatches)) for s in range(0, microbatches, stages)]"),
            ),
            (  # numpy's array_split into ceil(m / limit) rounds of nearly equal size, each flushed
                ("rounds = [range(microbatches)]      # 1F1B holds at most `stages`: one round, no flush",
                 "rounds = [range(int(c[0]), int(c[-1]) + 1)\n"
                 "                  for c in np.array_split(np.arange(microbatches), math.ceil(microbatches / limit))]"),
            ),
        ),
    ),
    Mistake(
        name="overlap_waits_for_backward",
        description="Registers no hooks: runs the whole backward pass, then walks the gradients in gradient-ready "
                    "order and starts each bucket's all-reduce (async) as it fills. The gradients, the buckets and "
                    "the bytes are right, but nothing travels during the backward pass, so the grader's hold on the "
                    "first layer is never released.",
        replacements=(("    hooks = [p.register_post_accumulate_grad_hook(on_ready) for p in params]\n",
                       "    hooks = []\n"),
                      ("    if current:\n        start(current)                       # the last bucket, not full\n",
                       "    for p in params[::-1]:                   # the gradients, once the backward is done\n"
                       "        on_ready(p)\n"
                       "    if current:\n        start(current)\n")),
        expected_failures={"13.8": (ANSWER, "2 ranks, MLP 16-24-12-6, batch 20, cap 300 bytes: overlap",
                                    "4 ranks, MLP 9-40-21-8, batch 28, cap 1,500 bytes: overlap")},
        variants=(
            (  # the hooks close the buckets, but every all-reduce starts once backward() has returned
                ("    ready, buckets, pending = [], [], []     # gradients in the order they became ready; buckets; "
                 "work in flight\n",
                 "    ready, buckets, pending = [], [], []\n    closed = []\n"),
                ("            start(current)                   # at once: the backward pass goes on while its bytes "
                 "travel\n", "            closed.append(current)\n"),
                ("    if current:\n        start(current)                       # the last bucket, not full\n",
                 "    for bucket in closed:\n        start(bucket)\n    if current:\n        start(current)\n"),
            ),
        ),
    ),
    Mistake(
        name="mixed_master_weights_twice",
        description="Counts the float32 master weights with the weights (2 + 4 bytes) as well as in the optimizer "
                    "state's 12: 20 bytes per parameter where the paper counts 16.",
        replacements=(('per_element = {"fp16_weights": 2, "fp16_grads"', 'per_element = {"fp16_weights": 2 + 4, '
                       '"fp16_grads"'),),
        variants=(
            (('"optimizer_state": 4 + 4 + 4}', '"optimizer_state": 4 + 4 + 4 + 4}'),),  # in the state, twice
        ),
        expected_failures={"13.9": (ANSWER, "70,001 parameters, 6 ranks, stage 0", "10,007 parameters, 4 ranks, stage 1",
                                    "11,689,513 parameters, 7 ranks, stage 2", "546 parameters, 5 ranks, stage 3")},
    ),
)

