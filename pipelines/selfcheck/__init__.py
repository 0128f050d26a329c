"""The harness's own self-checks, which measure the method, not a technique. calibration.py is a catalog entry
(A/A arms and injected slow-downs) with the technique files' shape (a PIPELINE the catalog names, here as
`selfcheck.<name>`); harness_overhead.py and book_loop.py are ci/harness-overhead.py's two forms (the shared
loop against loops written without the harness). They sit apart, so the technique files are only the sources'
techniques."""
