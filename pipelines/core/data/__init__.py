"""data: datasets on disk and in memory. Formats and their readers, fetch-and-verify of the published
files, the generator of small true-format files (marked generated), and the loaders a run trains on.

Layer 5: may import `errors`, `spec`, `record`, `stats` and `train` (models name their input shape).
"""
