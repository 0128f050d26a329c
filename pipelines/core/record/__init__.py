"""record: what a run leaves behind. Results records (JSONL, one line per finished repeat), the environment
fingerprint and the knobs it records, atomic writes, and the version stamp.

Layer 2: may import `errors` and `spec`.
"""
