"""stats: every number that judges. Intervals, the stopping rule, which arm is compared with which
(pairing), how their records pair (record_pairing), the per-arm rows with their ratios and intervals,
verdicts (judging; end to end, memory, counts), and how arms pair across processes. The runner,
`accel compare`, `accel diff` and the report all read these.

Layer 3: may import `errors`, `config` and `record`.
"""
