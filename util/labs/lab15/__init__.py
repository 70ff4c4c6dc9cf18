"""Lab 15, serving a language model: a BPE tokenizer, KV-cache bytes, a paged KV-cache allocator with
copy-on-write, attention over a paged cache, a continuous-batching scheduler under a cost model, and greedy
speculative decoding, on lab 10's TinyGPT, then (release 3) a prefix cache and speculative sampling and (release 4)
chunked prefill and (release 7) preemption by swapping (``tasks.py`` declares the tasks; ``tokenizer.py``,
``paged.py``, ``prefix.py``, ``serving.py``, ``chunked.py``, ``swapping.py`` and ``speculative.py`` are what the
notebook is given; ``spec_harness.py`` runs tasks 15.6 and 15.8 again in the grader's student process,
``chunk_harness.py`` task 15.9, ``swap_harness.py`` task 15.10)."""
