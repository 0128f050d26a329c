"""spec: what a run is, before anything runs. The catalog's types (Experiment, Variant, Published and their
bases), the per-technique options and RunConfig with the scale defaults and the repeat rule's settings.

Layer 1: may import only `pipelines.core.errors`. No torch at import time, so `accel list` and shell
completion stay instant.
"""
