"""Lab 15, serving a language model: a BPE tokenizer, KV-cache bytes, a paged KV-cache allocator with
copy-on-write, attention over a paged cache, a continuous-batching scheduler under a cost model, and greedy
speculative decoding, on lab 10's TinyGPT (``tasks.py`` declares the tasks; ``tokenizer.py``, ``paged.py``,
``serving.py`` and ``speculative.py`` are what the notebook is given; ``spec_harness.py`` runs task 15.6 again
in the grader's student process)."""
