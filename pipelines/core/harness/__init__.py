"""run: from a catalog entry to records. The pipeline contract the technique files implement, the plan
printed before work, and the runner (refusals, the repeat loop, the distributed hand-off, writing).

Layer 7: may import every layer below it.
"""
