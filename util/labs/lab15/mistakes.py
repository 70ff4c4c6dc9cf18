"""Lab 15 example submissions: the solution with one realistic mistake each.

The expected failures were worked out by grading each variant. Each passes what a light case shows and
fails where a hidden case has the structure the mistake ignores: a fork still reading a freed block, a
shared block read while a block is free (a full pool leaves nothing to copy into), memory pressure, a draft
that disagrees, a tie, a partly filled block.
"""
from util.contract import ANSWER, Mistake

MISTAKES = (
    Mistake(
        name="free_while_forked",
        description="free() gives every block of the sequence back to the free list, even the blocks a fork "
                    "still holds: the next allocation takes a block another sequence still reads (and a later "
                    "free gives it back twice).",
        replacements=(("            self.refs[block] -= 1\n            if self.refs[block] == 0:\n"
                       "                self.free_blocks.append(block)",
                       "            self.refs[block] = 0\n            self.free_blocks.append(block)"),),
        variants=(
            # the count kept, but every block given back whatever it says
            (("            self.refs[block] -= 1\n            if self.refs[block] == 0:\n"
              "                self.free_blocks.append(block)",
              "            self.refs[block] -= 1\n            self.free_blocks.append(block)"),),
        ),
        expected_failures={"15.3": (ANSWER, "parallel sampling: a prompt forked into four, freed before its forks",
                                    "forks at a block boundary, and forks of forks",
                                    "running out of blocks: every call that needs one raises, and nothing changes",
                                    "a random trace of 300 calls")},
    ),
    Mistake(
        name="cow_on_read",
        description="Copies a shared last block whenever a sequence's block table is read (when a block is "
                    "free), as if reading were writing: forks stop sharing what they only read, and a copy "
                    "nobody is told about holds none of the sequence's tokens.",
        replacements=(("        return list(self.tables[seq])",
                       "        try:\n            self._own_last(seq)   # hand out a table whose last block is this "
                       "sequence's own\n        except OutOfBlocks:\n            pass\n"
                       "        return list(self.tables[seq])"),),
        variants=(
            # the copy made only where the last block is shared and a block is free, by hand
            (("        return list(self.tables[seq])",
              "        if self.refs[self.tables[seq][-1]] > 1 and self.free_blocks:   # reading as writing\n"
              "            self._own_last(seq)\n"
              "        return list(self.tables[seq])"),),
        ),
        expected_failures={"15.3": (ANSWER, "parallel sampling: a prompt forked into four, freed before its forks",
                                    "forks at a block boundary, and forks of forks", "a random trace of 300 calls")},
    ),
    Mistake(
        name="never_preempts",
        description="A decode that finds no free block waits for one instead of preempting: right while blocks "
                    "last, but once every running request needs a block and none is freed, the batch is empty "
                    "and the server deadlocks.",
        replacements=(("        while need > free:\n            victim = running.pop()                   # the newest "
                       "running request\n            preempt.append(victim.id)\n            free += victim.blocks\n"
                       "            if victim is seq:\n                break\n        else:\n            free -= need\n"
                       "            decode.append(seq.id)\n            index += 1",
                       "        if need <= free:                             # no block now: it waits for one\n"
                       "            free -= need\n            decode.append(seq.id)\n        index += 1"),),
        variants=(
            # the first decode without a block stops the batch there: it and every newer one wait
            (("        while need > free:\n            victim = running.pop()                   # the newest "
              "running request\n            preempt.append(victim.id)\n            free += victim.blocks\n"
              "            if victim is seq:\n                break\n        else:\n            free -= need\n"
              "            decode.append(seq.id)\n            index += 1",
              "        if need > free:                              # no block: it and the newer ones wait\n"
              "            break\n        free -= need\n        decode.append(seq.id)\n        index += 1"),),
        ),
        expected_failures={"15.5": (ANSWER, "memory pressure: decodes preempt the newest requests",
                                    "a small running limit and long outputs")},
    ),
    Mistake(
        name="draft_kept_on_mismatch",
        description="At the first proposal the target disagrees with, keeps the draft's token instead of the "
                    "target's own: as many target calls, but every call that rejects a proposal adds a wrong "
                    "token, and the output is no longer the target's greedy decoding.",
        replacements=(("        take = torch.cat([drafted[:a], checked[a:a + 1]])[:n - len(decided)]",
                       "        take = (drafted[:a + 1] if a < m else torch.cat([drafted, checked[m:]]))[:n - len(decided)]"),),
        variants=(
            # the draft's token at the mismatch written as its own slice, the bonus kept after all m
            (("        take = torch.cat([drafted[:a], checked[a:a + 1]])[:n - len(decided)]",
              "        take = torch.cat([drafted[:a], drafted[a:a + 1] if a < m else checked[m:m + 1]])[:n - len(decided)]"),),
        ),
        expected_failures={"15.6": (ANSWER, "TinyGPT with k = 4, then a 3-layer GQA model with k = 3 from a "
                                            "one-token prompt")},
    ),
    Mistake(
        name="ties_to_the_largest_pair",
        description="Breaks ties between equally frequent pairs with max() instead of min(): the same merges "
                    "whenever one pair leads, other merges (and so other ids) as soon as two pairs tie, which "
                    "decides 99 of the 256 merges on the course's text.",
        replacements=(("            a, b = min(pair for pair, count in pairs.items() if count == top)",
                       "            a, b = max(pair for pair, count in pairs.items() if count == top)"),),
        variants=(
            # the largest pair by sorting, or by the last of the most common pairs in sorted order
            (("            a, b = min(pair for pair, count in pairs.items() if count == top)",
              "            a, b = sorted(pair for pair, count in pairs.items() if count == top)[-1]"),),
        ),
        expected_failures={"15.1": (ANSWER, "UTF-8 text: accents, Greek, Cyrillic, CJK and emoji",
                                    "a synthetic text where ties decide most merges"),
                           "15.2": (ANSWER,)},
    ),
    Mistake(
        name="attends_to_whole_blocks",
        description="Reads every slot of a sequence's blocks, not only its first `length`: the last block's "
                    "unused slots (garbage, or zeros, or a later position's key during a prefill) join the "
                    "softmax.",
        replacements=(
            ("        k = k_pool[table].transpose(0, 1).reshape(n_kv_head, -1, head_dim)[:, :length]   # [n_kv_head, T, d]",
             "        k = k_pool[table].transpose(0, 1).reshape(n_kv_head, -1, head_dim)   # [n_kv_head, T, d]"),
            ("        v = v_pool[table].transpose(0, 1).reshape(n_kv_head, -1, head_dim)[:, :length]",
             "        v = v_pool[table].transpose(0, 1).reshape(n_kv_head, -1, head_dim)"),
        ),
        variants=(
            # cut at the table's slots instead of the sequence's length
            (("        k = k_pool[table].transpose(0, 1).reshape(n_kv_head, -1, head_dim)[:, :length]   # [n_kv_head, T, d]",
              "        k = k_pool[table].transpose(0, 1).reshape(n_kv_head, -1, head_dim)[:, :len(table) * k_pool.shape[2]]"),
             ("        v = v_pool[table].transpose(0, 1).reshape(n_kv_head, -1, head_dim)[:, :length]",
              "        v = v_pool[table].transpose(0, 1).reshape(n_kv_head, -1, head_dim)[:, :len(table) * v_pool.shape[2]]")),
        ),
        expected_failures={"15.4": (ANSWER, "shuffled blocks, partial last blocks, garbage everywhere else",
                                    "grouped-query attention (8 heads over 2) and a shared prefix",
                                    "full last blocks and one-token sequences")},
    ),
    Mistake(
        name="prefix_hash_ignores_parent",
        description="Names a full block by a hash of its own tokens only, not its parent's name: a block of the same "
                    "tokens after another prefix is found in the cache and reused, though its keys and values were "
                    "computed in another context.",
        replacements=(("        return hash((parent, tuple(block_tokens)))",
                       "        return hash(tuple(block_tokens))"),),
        variants=(
            # the parent left out another way: every block named as if it were the first
            (("        return hash((parent, tuple(block_tokens)))",
              "        return hash((None, tuple(block_tokens)))"),),
        ),
        expected_failures={"15.7": (ANSWER, "shared system prompts and questions everyone asks, with and without a "
                                            "system prompt",
                                    "whole-block prompts, the same tokens after another prefix, a pool that runs out")},
    ),
    Mistake(
        name="evicts_referenced_block",
        description="Evicts the block cached longest ago, whether or not a running request still holds it: when "
                    "the pool runs short, a block a running request still reads is handed to another and written.",
        replacements=(("            block = next(iter(self.evictable))\n            del self.evictable[block]\n",
                       "            block = next(iter(self.names))              # the oldest cached block, held or "
                       "not\n            self.evictable.pop(block, None)\n"),),
        variants=(
            # a reused block left in the queue of evictable ones while a request holds it again
            (("            self.evictable.pop(block, None)                 # held again: not evictable\n",
              ""),),
        ),
        expected_failures={"15.7": (ANSWER, "shared system prompts and questions everyone asks, with and without a "
                                            "system prompt",
                                    "multi-turn conversations: each turn repeats the conversation so far",
                                    "a small pool: evictions, least recently used first",
                                    "whole-block prompts, the same tokens after another prefix, a pool that runs out")},
    ),
    Mistake(
        name="resamples_from_p",
        description="After a rejection samples the round's token from the target's p instead of the residual "
                    "max(0, p - q): plausible, but the tokens over-represent what the draft proposes, so they no "
                    "longer follow the target's distribution.",
        replacements=(("        weights = torch.clamp(p[a] - qs[a], min=0) if a < m else p[m]     # the residual, or "
                       "the bonus position",
                       "        weights = p[a]     # the target's own distribution"),),
        variants=(
            # the target's distribution at the rejected position, indexed another way
            (("        weights = torch.clamp(p[a] - qs[a], min=0) if a < m else p[m]     # the residual, or "
              "the bonus position",
              "        weights = p[min(a, m)]     # the target's distribution there"),),
        ),
        expected_failures={"15.8": (ANSWER, "TinyGPT with k = 4, then a 3-layer GQA model with k = 3 from a one-token "
                                            "prompt, on the grader's draws",
                                    "the tokens' distribution over 400 runs on fresh draws (chi-square at 1e-6)")},
    ),
    Mistake(
        name="swaps_when_recomputing_is_cheaper",
        description="Swaps every victim out while the CPU has room, whatever it costs: a long request's blocks cross "
                    "the bus twice where recomputing its prefill would have been cheaper, and every later iteration "
                    "differs from the stated policy's.",
        replacements=(("            if config.swap_ns(victim.blocks) < view.recompute_ns(victim) and victim.blocks <= "
                       "cpu:",
                       "            if victim.blocks <= cpu:                 # swapping always saves the recompute"),),
        variants=(
            # the cost of moving the blocks one way only, against the recompute
            (("            if config.swap_ns(victim.blocks) < view.recompute_ns(victim) and victim.blocks <= "
              "cpu:",
              "            if victim.blocks * config.swap_ns_per_block < view.recompute_ns(victim) and victim.blocks "
              "<= cpu:"),),
        ),
        expected_failures={"15.10": (ANSWER, "memory pressure, 40 CPU blocks: short victims swapped, long ones "
                                             "recomputed (3 traces the grader draws)",
                                     "a burst at time 0 under a small running limit: swaps, recomputes and swap-ins")},
    ),
    Mistake(
        name="chunk_starves_decodes",
        description="Gives the budget to chunks of prompts first and lets the decodes have what is left: right while "
                    "the budget covers both, but as soon as a long prompt's chunk takes the whole budget the running "
                    "requests decode nothing in that iteration, and their time per token jumps.",
        replacements=(("    decode = [seq.id for seq in view.running if seq.remaining == 0]\n"
                       "    budget = view.config.max_tokens - len(decode)\n",
                       "    budget = view.config.max_tokens             # chunks first: the decodes get what is left\n"),
                      ("    return Chunks(tuple(decode), tuple(prefill))",
                       "    decode = [seq.id for seq in view.running if seq.remaining == 0][:budget]\n"
                       "    return Chunks(tuple(decode), tuple(prefill))")),
        variants=(
            # the decodes after the prefilling prompts' chunks, before the queue's
            (("    decode = [seq.id for seq in view.running if seq.remaining == 0]\n"
              "    budget = view.config.max_tokens - len(decode)\n",
              "    budget = view.config.max_tokens\n"),
             ("    count = len(view.running)\n",
              "    decode = [seq.id for seq in view.running if seq.remaining == 0][:budget]\n"
              "    budget -= len(decode)\n    count = len(view.running)\n")),
            # the decodes first in the batch, but the chunks sized from the whole budget
            (("    budget = view.config.max_tokens - len(decode)\n",
              "    budget = view.config.max_tokens\n"),
             ("    return Chunks(tuple(decode), tuple(prefill))",
              "    spent = sum(tokens for _, tokens in prefill)\n"
              "    return Chunks(tuple(decode[:view.config.max_tokens - spent]), tuple(prefill))")),
        ),
        expected_failures={"15.9": (ANSWER, "a steady stream of long prompts under a budget of 512 tokens (3 traces "
                                            "the grader draws)",
                                    "a small budget: every prompt in many chunks beside many decodes (3 traces the "
                                    "grader draws)",
                                    "a burst at time 0: chunks cut at the budget, admissions stopped by the "
                                    "running limit")},
    ),
)
