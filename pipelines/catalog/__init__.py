"""Catalog entries, one module per source. Each module exposes EXPERIMENTS: a tuple of Experiment."""
