"""Lab 17, what a frontier model costs: the one declaration of its tasks.

From published configurations (Mixtral 8x7B, DeepSeek-V3, Llama 3 8B) and a stated GPU (an H100 SXM), students
count what the models in the news cost: a mixture of experts' total and activated parameters and FLOPs per token
(17.1, checked against a small MoE the course builds on PyTorch's meta device), a top-k router's assignment of a
batch with a capacity per expert and the bytes its all-to-all sends (17.2), the KV cache of multi-head,
grouped-query, multi-query and multi-head latent attention and the context that fills a GPU (17.3), a scaling law
fitted to the course's table of training runs and the compute-optimal model size and tokens for a budget (17.4),
a cluster's training plan (FLOPs, days, memory per GPU by part under data, tensor and pipeline parallelism with
ZeRO and activation checkpointing, the pipeline bubble, the bytes per step) and the smallest cluster that meets a
deadline (17.5), and a serving plan at the roofline with its price per million tokens (17.6).

Everything is counting under stated conventions: the hidden cases call the student's functions on perturbed
configurations (other expert counts, top-k, latent sizes, world sizes), hidden router logits and hidden tables of
runs, compared with the solution's values (``regen``). Nothing is measured and nothing is trained, so no judge is
needed: the kernel returns the student's values and the grader compares them.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Tolerance, Written
from util.labs.lab17.public_checks import CHECKS

LAB_NAME = "lab17"
RATIO = Tolerance(rtol=1e-9)
"""Plans are products and quotients of exact counts: only the last bits of a float may differ."""
FIT = Tolerance(rtol=1e-3)
"""The fit's parameters and what follows from them: the stated procedure finds its minimum to about 1e-7, so a
band of 1e-3 leaves room for another optimizer's stopping point and none for another objective."""


def _model(fields: Mapping[str, Any]):
    from util.labs.lab17.configs import ModelConfig

    return ModelConfig.from_dict(fields)


def _gpu(fields: Mapping[str, Any]):
    from util.labs.lab17.configs import GPU

    return GPU.from_dict(fields)


def _counts(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return [fn(_model(config)) for config in spec["configs"]]


def _route(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab17.configs import router_logits

    logits = router_logits(spec["tokens"], spec["experts"], spec["seed"])
    return [fn(logits.copy(), q["top_k"], q["capacity_factor"], ep=q["ep"], d_model=q["d_model"],
               bytes_per_element=q["bytes"]) for q in spec["queries"]]


def _kv(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return [fn(_model(q["config"]), q["context"], q["batch"], q["memory"], q["weight_bytes"],
               bytes_per_element=q["bytes"]) for q in spec["queries"]]


def _scaling(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab17.scaling import training_runs

    return fn(training_runs(spec["seed"], spec["truth"]), spec["budgets"])


def _cluster(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab17.configs import TrainingPlan

    return [fn(_model(q["config"]), _gpu(q["gpu"]), TrainingPlan.from_dict(q["plan"]), q["deadline_days"])
            for q in spec["queries"]]


def _serving(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return [fn(_model(q["config"]), _gpu(q["gpu"]), q["gpus"], q["context"], q["price"],
               bytes_per_element=q["bytes"]) for q in spec["queries"]]


RELEASES = (
    Release(1, "2026-12-02", "The first release: a mixture of experts' total and activated parameters and FLOPs, a "
            "router with a capacity per expert and its all-to-all, KV caches by attention kind (MLA included), a "
            "scaling-law fit and the compute-optimal budget, a cluster's training plan and a serving plan."),
)
"""The lab's changelog (``Lab.releases``)."""


WRITTEN = {
    "17.4": (Written("17.Q1", "Why does the stated procedure fit the logarithm of the loss rather than the loss, "
                     "and how many tokens per parameter does your fit give at 1e23 FLOPs, against the 20 of the "
                     "rule of thumb?", 3, words=(30, 200)),),
    "17.6": (Written("17.Q2", "Mixtral 8x7B costs more per million tokens than the dense model of its activated "
                     "size on the same two GPUs, although each token does the same FLOPs. Why, and when would the "
                     "mixture win?", 2, words=(30, 200)),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py``."""


LAB = Lab(
    name=LAB_NAME,
    title="What a frontier model costs",
    notebook="lab17_frontier_costs.ipynb",
    packages=("torch", "numpy", "scipy"),
    releases=RELEASES,
    tasks=(
        Task(
            id="17.1", title="Mixture of experts: total and activated", answer_points=4,
            answer="{'mixtral', 'deepseek_v3', 'llama3_8b'}: each moe_counts(cfg) = {'total', 'activated', "
                   "'flops_per_token'} (ints)",
            keys=("mixtral", "deepseek_v3", "llama3_8b"),
            function="moe_counts", run_case=_counts, checks=CHECKS["17.1"], hidden_points=12,
        ),
        Task(
            id="17.2", title="A router with a capacity per expert", answer_points=3,
            answer="{'course_batch': route(...) of the course's logits, 'per_rank_bytes': the all-to-all bytes at "
                   "ep = 1, 2, 4, 8}",
            keys=("course_batch", "per_rank_bytes"), tolerance=RATIO,
            function="route", run_case=_route, checks=CHECKS["17.2"], hidden_points=12,
        ),
        Task(
            id="17.3", title="Attention that caches less", answer_points=3,
            answer="{'mha', 'gqa', 'mqa', 'mla'}: kv_plan(...) of each attention kind at 32,768 tokens on one H100 "
                   "({'per_token', 'cache', 'max_context', 'decode_flops_naive', 'decode_flops_absorbed'})",
            keys=("mha", "gqa", "mqa", "mla"),
            function="kv_plan", run_case=_kv, checks=CHECKS["17.3"], hidden_points=10,
        ),
        Task(
            id="17.4", title="A scaling law and the compute-optimal budget", answer_points=4,
            answer="{'course': scaling_plan(course runs, [1e21, 1e23]), 'chinchilla': [compute_optimal(CHINCHILLA, "
                   "C)], 'rule_of_20': [{'N', 'D'}]}",
            keys=("course", "chinchilla", "rule_of_20"), tolerance=FIT,
            function="scaling_plan", run_case=_scaling, checks=CHECKS["17.4"], written=WRITTEN["17.4"],
            hidden_points=14,
        ),
        Task(
            id="17.5", title="A cluster's training plan", answer_points=4,
            answer="{'llama3_8b': training_plan(...), 'deepseek_v3': training_plan(...), 'smallest': "
                   "smallest_cluster(...)}",
            keys=("llama3_8b", "deepseek_v3", "smallest"), tolerance=RATIO,
            function="smallest_cluster", run_case=_cluster, checks=CHECKS["17.5"], hidden_points=16,
        ),
        Task(
            id="17.6", title="A serving plan and its price", answer_points=3,
            answer="{'mixtral', 'dense_same_activated', 'deepseek_v3', 'llama3_8b'}: serving_plan(...) each",
            keys=("mixtral", "dense_same_activated", "deepseek_v3", "llama3_8b"), tolerance=RATIO,
            function="serving_plan", run_case=_serving, checks=CHECKS["17.6"], written=WRITTEN["17.6"],
            hidden_points=10,
        ),
    ),
)
