"""Code the shipped Python workloads share (experiments/executors.yaml)."""
