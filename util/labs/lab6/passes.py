"""The optimisation passes of the pinned onnxruntime: the one list of names the whole lab uses.

onnxruntime calls its passes *graph transformers* and *rewrite rules*. A session runs them level by
level (``ORT_ENABLE_BASIC`` = level 1, ``ORT_ENABLE_EXTENDED`` adds level 2, ``ORT_ENABLE_ALL`` adds
the layout level 3), and ``InferenceSession(..., disabled_optimizers=[names])`` switches single ones
off, as TVM's ``PassContext(disabled_pass=[...])`` does.

**An unknown name is silently ignored**: ``disabled_optimizers=["GeluFusion"]`` (the name in older
docs; onnxruntime 1.31.1 has ``GeluFusionL1`` and ``GeluFusionL2``) disables nothing and raises
nothing. So the names below were read from the pinned binary itself, never typed from memory:

* the transformers a CPU session registers at levels 1 and 2, from its verbose log
  (``log_severity_level=0``: "Applying graph transformer NAME"); ``Level1_RuleBasedTransformer``
  and ``Level2_RuleBasedTransformer`` are left out: they are containers for the rules below, and
  disabling one disables all its rules at once;
* the rewrite rules inside those containers, whose names only the binary's strings show
  (they sit together, in registration order). ``CastChainElimination`` is left out: it only runs
  when a session option enables it.

The course's tests re-read both from the installed onnxruntime and pin every isolation result the
lab depends on, so a version bump that renames a pass fails a test instead of silently disabling nothing.
"""
from __future__ import annotations

ONNXRUNTIME_VERSION = "1.31.1"
"""The onnxruntime these names were read from (``requirements.txt`` pins it)."""

LEVEL1_RULES = (
    "EliminateIdentity", "EliminateSlice", "UnsqueezeElimination", "EliminateDropout", "ExpandElimination",
    "CastElimination", "PreShapeNodeElimination", "NoopElimination", "DivMulFusion", "FuseReluClip",
    "GemmSumFusion", "GemmTransposeFusion", "NotWhereFusion", "ConvAddFusion", "ConvMulFusion", "ConvBNFusion",
    "Pad_Fusion", "MatMul_BatchNormalization_Fusion", "LabelEncoderFusion",
)
"""Rewrite rules of ``Level1_RuleBasedTransformer`` (BASIC)."""

LEVEL1_TRANSFORMERS = (
    "DoubleQDQPairsRemover", "ConstantSharing", "CommonSubexpressionElimination", "ConstantFolding",
    "MatMulAddFusion", "ReshapeFusion", "FreeDimensionOverrideTransformer", "SliceConcatToSpaceToDepthFusion",
    "GeluFusionL1", "LayerNormFusionL1", "QDQPropagationTransformer", "WeightBiasQuantization",
    "EnsureUniqueDQForNodeUnit", "WhereDummyDq", "TransposeOptimizer",
)
"""Level-1 (BASIC) graph transformers, in the order a session applies them."""

LEVEL2_RULES = ("ClipQuantRewrite", "ReluQuantRewrite")
"""Rewrite rules of ``Level2_RuleBasedTransformer`` (its third rule, ``GemmTransposeFusion``, is a level-1 name too)."""

LEVEL2_TRANSFORMERS = (
    "TransposeOptimizer_CPUExecutionProvider", "QDQS8ToU8Transformer", "QDQSelectorActionTransformer",
    "GemmActivationFusion", "MatMulIntegerToFloatFusion", "DynamicQuantizeMatMulFusion", "ConvActivationFusion",
    "GeluFusionL2", "LayerNormFusionL2", "SimplifiedLayerNormFusion", "AttentionFusion", "EmbedLayerNormFusion",
    "GatherSliceToSplitFusion", "GatherToSliceFusion", "MatmulTransposeFusion", "BiasGeluFusion",
    "GroupQueryAttentionFusion", "SkipLayerNormFusion", "BiasSkipLayerNormFusion", "FastGeluFusion",
    "QuickGeluFusion", "BiasSoftmaxFusion", "BiasDropoutFusion", "MatMulScaleFusion", "MatMulActivationFusion",
    "MatMulNBitsFusion", "GroupQueryAttentionPreNormFusion", "QDQFinalCleanupTransformer",
)
"""Level-2 (EXTENDED) graph transformers on the CPU (``MatMulAddFusion`` runs again here: one name, both levels)."""

CANDIDATES = LEVEL1_RULES + LEVEL1_TRANSFORMERS + LEVEL2_RULES + LEVEL2_TRANSFORMERS
"""Every pass name an EXTENDED session on the CPU may disable (64), basic level first."""

LEVELS = ("DISABLE_ALL", "BASIC", "EXTENDED", "ALL")
"""``onnxruntime.GraphOptimizationLevel.ORT_<name>``; ALL is shown in the notebook, never graded
(its NCHWc layout depends on the CPU's vector width)."""
