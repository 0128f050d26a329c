"""The harness's own self-checks: entries that measure the method, not a technique (calibration.py: A/A arms and
injected slow-downs). They have the technique files' shape (a PIPELINE the catalog names, here as
`selfcheck.<name>`) but sit apart, so the technique files are only the sources' techniques."""
