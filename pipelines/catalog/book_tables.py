"""The book's timing tables as data: facts printed in "Accelerate Model Training with PyTorch 2.X".

Entries build their published figures from these tables, and every ratio from two printed times with
`ratio`, so a ratio cannot drift from the times or from the arm it is compared with
(tests/test_catalog.py recomputes each catalog ratio from the catalog's times and declared baselines).
Times are the book's wall-clock seconds, truncated to integers as printed. This module defines no
experiments.
"""

TABLE_6_1 = {10: (118, 47.26), 20: (113, 45.84), 30: (107, 44.66), 40: (100, 45.18), 50: (89, 42.71),
             60: (84, 41.90), 70: (81, 40.84), 80: (76, 38.87)}  # sparsity % -> (train s, accuracy %)
TABLE_6_1_UNPRUNED = (122, 47.10)
TABLE_9_1 = {1: 311, 2: 189, 4: 119, 8: 93, 12: 73, 16: 73}  # threads of one process -> train s
TABLE_9_1_ACCURACY = {16: 45.34}  # the 16-thread run Tables 9.2 and 9.3 compare against
TABLE_9_2 = {2: (58, 44.01), 4: (45, 40.11), 8: (37, 38.63)}  # Gloo ranks (x 16/ranks threads) -> (s, %)
TABLE_9_3 = {2: (53, 43.12), 4: (42, 41.03), 8: (35, 37.99)}  # oneCCL ranks (x 16/ranks threads) -> (s, %)
TABLE_10_2 = {1: (707, 78.76), 2: (393, 74.82), 3: (276, 72.70), 4: (208, 70.72), 5: (172, 68.34),
              6: (142, 69.44), 7: (122, 69.00), 8: (109, 68.82)}  # GPUs (1 node) -> (train s, accuracy %)
CH11_TWO_NODES = (64, 63.73)  # 2 nodes x 8 GPUs -> (train s, accuracy %)


def ratio(baseline_s: float, variant_s: float) -> float:
    """Published speed-up as the catalog carries it: baseline time / variant time, two decimals."""
    return round(baseline_s / variant_s, 2)
