"""dist: more than one process. The rank contract (placement, backends, process group, collectives,
shutdown), rendezvous, sharding, thread affinity, the torchrun agent wrapper, Fabric strategies' plumbing,
the machine doctor, and the launchers' knobs (launchers, knobs, hosts, containers).

Layer 6: may import every layer below (`errors`, `spec`, `record`, `stats`, `train`, `data`).
"""
