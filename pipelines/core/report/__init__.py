"""report: records to documents. Tables, plots, the Markdown/HTML/CSV report, and the drift check
against a committed reference. Rendering only: the numbers come from `stats`.

Layer 8: may import every layer below except `run` (a report never runs anything).
"""
