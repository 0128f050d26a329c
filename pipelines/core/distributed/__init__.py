"""dist: more than one process. The rank contract (placement, process group, gather, shutdown),
rendezvous, sharding, thread affinity, the torchrun agent wrapper, Fabric strategies' plumbing and the
machine doctor.

Layer 6: may import every layer below (`errors`, `spec`, `record`, `stats`, `train`, `data`).
"""
