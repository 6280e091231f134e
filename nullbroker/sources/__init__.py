"""Synthetic source topics: their specs and records, Nexmark, JSON and Avro values."""
