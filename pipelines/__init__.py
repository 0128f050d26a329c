"""Reference pipelines for PyTorch training acceleration: one thin module per technique over `core`."""
