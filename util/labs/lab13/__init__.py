"""Lab 13: parallelism on one machine (collectives from send/recv; data, tensor and pipeline parallel, ZeRO)."""
