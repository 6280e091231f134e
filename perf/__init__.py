"""Benchmarks and perf tools: codec microbenchmarks, producer and consumer perf twins."""
