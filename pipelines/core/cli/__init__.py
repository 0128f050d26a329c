"""cli: the `accel` command. Argument types, the commands, their one-line refusals and exit codes.

Layer 9, the top: may import every room; nothing imports it.
"""
