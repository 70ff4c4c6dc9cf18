"""Lab 5: graph substitutions (BatchNorm folding, AvgAdd, ConvAdd) and the floating-point differences they cause."""
