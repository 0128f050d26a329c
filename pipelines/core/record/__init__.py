"""record: what a run leaves behind. Results records (JSONL, one line per finished repeat) and the reading of
a results folder, the environment fingerprint and the knobs it records, which machines' times compare,
atomic writes, and the version stamp.

Layer 2: may import `errors` and `spec`.
"""
