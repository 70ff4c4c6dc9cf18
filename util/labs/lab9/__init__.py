"""Lab 9: quantization, from integer arithmetic to an ONNX QDQ model.

``tasks.py`` declares the lab; ``digits.py`` trains, folds and exports DigitsCNN and its outlier
variants; ``qmodel.py`` describes an integer-only model (and plants the rounding ties of 9.3's hidden models); ``onnxq.py`` holds the onnxruntime helpers;
``nets.py`` the hidden cases' tensors and small models; ``plots.py`` the two figures;
``public_checks.py`` the self-checks. Grader-only: ``judge.py`` (the checks of saved files),
``judge_intref.py`` (the course's integer reference) and ``mistakes.py`` (the example submissions).
"""
