"""Lab 3, ONNX GEMM tiling (AlexNet): the one declaration of its tasks.

An accelerator multiplies at most ``m_max x k_max x n_max`` matrices; students rewrite Gemms into
subgraphs whose MatMuls all fit. Tasks 3.1, 3.2, 3.3 and 3.6 return ONNX models, which JSON cannot
hold: their hidden cases save each model with ``util.artifacts.save_model`` and the *grader* judges
the file in its own process (``grader_check``, see ``judge.py``): structure (no Gemm
left, every MatMul within the bounds per batch slice, allowed operators only, checker and shape
inference pass, IR version onnxruntime loads) and numbers (onnxruntime on random inputs the grader
draws, against float64 numpy or the untiled model).

Tolerance of those numbers: ``rtol = atol = 1e-4``. Tiling changes the order in which float32
products are summed (per tile, then across tiles), so results differ from the untiled Gemm in the
last bits: about 1e-6 here, 1e-8 on AlexNet's small outputs. A dropped or misplaced tile is off by
the size of the values themselves (0.1 to 10).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Tolerance, Written
from util.labs.lab3.public_checks import CHECKS as PUBLIC

NUMBERS = Tolerance(rtol=1e-4, atol=1e-4)
"""Outputs of a rewritten model against the reference (float32 summation order differs)."""
REPORT = Tolerance(rtol=1e-2)
"""``max_abs_diff`` of task 3.4: the differences there are planted, far above float32 noise."""
CHECKS = "util.labs.lab3.judge"
LAB_NAME = "lab3"

def _call_gemm(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.artifacts import save_model

    model = fn(spec["M"], spec["K"], spec["N"], trans_a=spec["trans_a"], trans_b=spec["trans_b"],
               alpha=spec["alpha"], beta=spec["beta"])
    return save_model(model, spec, LAB_NAME, fn.__name__)


def _call_tiled(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.artifacts import save_model

    model = fn(spec["M"], spec["K"], spec["N"], tuple(spec["bounds"]), trans_a=spec["trans_a"],
               trans_b=spec["trans_b"], alpha=spec["alpha"], beta=spec["beta"])
    return save_model(model, spec, LAB_NAME, fn.__name__)


def _original(spec: Mapping[str, Any]):
    # imported here so that ``util.labs`` (imported by every ``submit``) does not load onnx
    from util.labs.lab3.graphs import gemm_chain_graph
    from util.onnx_models import export_torchvision

    return gemm_chain_graph() if spec["model"] == "gemm_chain" else export_torchvision(spec["model"])


def _call_model(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.artifacts import save_model

    return save_model(fn(_original(spec), tuple(spec["bounds"])), spec, LAB_NAME, fn.__name__)


def _call_equivalence(fn: Callable, spec: Mapping[str, Any]) -> Any:
    import numpy as np

    from util.labs.lab3.graphs import gemm_chain_graph, perturbed

    original = gemm_chain_graph()
    rewritten = perturbed(original, spec["initializer"], spec["delta"], spec.get("index"))
    feeds = {"x": np.random.default_rng(spec["seed"]).standard_normal((5, 37)).astype(np.float32)}
    return fn(original, rewritten, feeds, rtol=spec["rtol"], atol=spec["atol"])


def _call_netron(fn: Callable, spec: Mapping[str, Any]) -> Any:
    import onnx

    from util.answers import output_dir
    from util.netron_view import stop
    from util.onnx_models import tiny_shape_graph

    try:
        url = fn(tiny_shape_graph(), spec["file"])
    finally:
        stop()
    path = output_dir(LAB_NAME) / spec["file"]
    saved = onnx.load(str(path)) if path.is_file() else None
    return {"saved_nodes": len(saved.graph.node) if saved else None,
            "serving": isinstance(url, str) and url.startswith("http://")}



def prepare() -> None:
    """Fill the ONNX export cache with AlexNet (the notebook's model and a hidden case's)."""
    from util.onnx_models import export_torchvision

    export_torchvision("alexnet")


RELEASES = (
    Release(1, "2026-11-22", "The first release: AlexNet's Gemms rewritten into MatMuls that fit an accelerator's "
            "bounds, checked with onnxruntime, viewed in netron, and laid out efficiently."),
    Release(2, "2026-11-23",
            "gemm_chain_graph and perturbed moved from util.onnx_models to util.labs.lab3.graphs. Nothing graded "
            "changed, and the old import keeps working (it prints a DeprecationWarning you may ignore).",
            marker="from util.labs.lab3.graphs import gemm_chain_graph, perturbed"),
    Release(3, "2026-11-23",
            "The notebook states every rule the grader already applied: the tolerance of 3.2-3.4 and 3.6 "
            "(rtol = atol = 1e-4), the refusal of a model with a tensor over 2^27 elements, and 3.6's node limit "
            "as checked (each Gemm may become at most 16 nodes: the original's nodes, minus its Gemms, plus 16 "
            "per Gemm); it adds a picture of the tiles of 3.2 (util.labs.lab3.figures.draw_tile_grid). Nothing "
            "graded changed.",
            marker="each Gemm may become at most 16 nodes"),
    Release(4, "2026-11-26", "Tasks 3.3 and 3.6 ask written questions, Q1 (3 points) and Q2 (2 points), marked by "
            "hand: what the naive layout's nodes cost, and what padding the weight tiles costs; their "
            "points came from the two tasks' exported answers.",
            marker="(written, 3 points of task 3.3, marked by hand)"),
)
"""The lab's changelog (``Lab.releases``)."""


WRITTEN = {
    "3.3": (Written("3.Q1", "Your naive AlexNet does exactly the multiplications of the untiled model. How "
                     "many MatMul nodes does it have, and why do that many small nodes cost time that "
                     "three Gemms do not, both when the session is created and on every run?",
                     3, words=(30, 200), since=4),),
    "3.6": (Written("3.Q2", "The batched layout multiplies zero padding. For AlexNet's last Gemm (4096 x "
                     "1000, `tn = 64`), how many of the output columns it computes are padding, and "
                     "why does the padding cost so little?",
                     2, words=(20, 150), since=4),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 4): their
points came out of their task's exported answer."""


LAB = Lab(
    name=LAB_NAME,
    prepare="util.labs.lab3.tasks:prepare",
    title="ONNX GEMM tiling",
    notebook="lab3_gemm_tiling.ipynb",
    packages=("torch", "torchvision", "onnx", "onnxscript", "onnxruntime", "numpy"),
    releases=RELEASES,
    tasks=(
        Task(
            id="3.1", title="A single Gemm", answer_points=2,
            answer="summarize(gemm_model(32, 64, 128, trans_b=True, alpha=0.5)): the dict summarize returns",
            tolerance=NUMBERS, function="gemm_model", run_case=_call_gemm, grader_check=f"{CHECKS}:check_gemm",
            checks=PUBLIC["3.1"],
            hidden_points=8,
        ),
        Task(
            id="3.2", title="Tiled Gemm subgraph", answer_points=4,
            answer="summarize(tiled_gemm_model(32, 64, 128, (16, 32, 32))): the dict summarize returns",
            tolerance=NUMBERS, function="tiled_gemm_model", run_case=_call_tiled,
            grader_check=f"{CHECKS}:check_tiled",
            checks=PUBLIC["3.2"],
            hidden_points=36,
        ),
        Task(
            id="3.3", title="Every Gemm of AlexNet tiled", answer_points=1, written=WRITTEN["3.3"],
            answer="summarize(replace_gemms(alexnet, (64, 64, 64)))",
            tolerance=NUMBERS, function="replace_gemms", run_case=_call_model, grader_check=f"{CHECKS}:check_model",
            checks=PUBLIC["3.3"],
            hidden_points=16,
        ),
        Task(
            id="3.4", title="Equivalence with onnxruntime", answer_points=2,
            answer="a dict {'max_abs_diff': float, 'agree': bool} from equivalence_report",
            keys=("max_abs_diff", "agree"), tolerance=REPORT,
            function="equivalence_report", run_case=_call_equivalence,
            checks=PUBLIC["3.4"],
            hidden_points=8,
        ),
        Task(
            id="3.5", title="Netron", answer_points=2,
            answer="a dict {'file': str, 'saved_nodes': int, 'serving': bool}",
            keys=("file", "saved_nodes", "serving"),
            function="show_in_netron", run_case=_call_netron,
            checks=PUBLIC["3.5"],
            hidden_points=3,
        ),
        Task(
            id="3.6", title="Efficient tiled layout", answer_points=1, written=WRITTEN["3.6"],
            answer="a dict {'gemms': int, 'within_bounds': bool, 'nodes_per_gemm_at_most_16': bool}",
            keys=("gemms", "within_bounds", "nodes_per_gemm_at_most_16"),
            tolerance=NUMBERS, function="replace_gemms_batched", run_case=_call_model,
            grader_check=f"{CHECKS}:check_model",
            checks=PUBLIC["3.6"],
            hidden_points=12,
        ),
    ),
)
