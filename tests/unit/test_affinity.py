"""GOMP_CPU_AFFINITY lists: physical cores first, from the usable cpus, on fake and real topologies."""

import os

import pytest

from pipelines.core.distributed import affinity

# 4 cores x 2 hyper-threads, siblings numbered last (cpu n and n+4 share a core), as many Intel servers.
SIBLINGS_LAST = {cpu: (0, cpu % 4) for cpu in range(8)}
# The same machine numbered with siblings adjacent (cpu 2k and 2k+1 share a core), as many AMD/laptops.
SIBLINGS_ADJACENT = {cpu: (0, cpu // 2) for cpu in range(8)}


def test_siblings_numbered_last_keep_numeric_order():
    assert affinity.physical_first(range(8), SIBLINGS_LAST) == [0, 1, 2, 3, 4, 5, 6, 7]


def test_adjacent_siblings_put_one_cpu_per_core_first():
    assert affinity.physical_first(range(8), SIBLINGS_ADJACENT) == [0, 2, 4, 6, 1, 3, 5, 7]
    assert affinity.gomp_list(4, SIBLINGS_ADJACENT) == "0,2,4,6"  # 4 threads on 4 distinct cores


def test_two_sockets_with_the_same_core_ids_are_different_cores():
    topology = {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1), 4: (0, 0), 5: (0, 1), 6: (1, 0), 7: (1, 1)}
    assert affinity.gomp_list(4, topology) == "0,1,2,3"
    assert affinity.physical_cores(topology) == 4


def test_only_usable_cpus_are_listed():
    """A cpuset of {1, 3, 5} on the adjacent-sibling machine: cores 0, 1, 2 once each."""
    usable = {cpu: SIBLINGS_ADJACENT[cpu] for cpu in (1, 3, 5)}
    assert affinity.gomp_list(None, usable) == "1,3,5"


def test_zero_threads_is_an_error():
    with pytest.raises(ValueError, match="at least 1"):
        affinity.gomp_list(0, SIBLINGS_LAST)


def test_reads_sysfs_layout(tmp_path):
    """The real reader over a sysfs-shaped folder; a cpu without topology files is its own core."""
    for cpu, (package, core) in {0: (0, 0), 1: (0, 0), 2: (0, 1)}.items():
        folder = tmp_path / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "physical_package_id").write_text(f"{package}\n")
        (folder / "core_id").write_text(f"{core}\n")
    topology = affinity.read_topology([0, 1, 2, 3], root=tmp_path)
    assert topology == {0: (0, 0), 1: (0, 0), 2: (0, 1), 3: (-1, 3)}
    assert affinity.physical_first(topology, topology) == [0, 2, 3, 1]


def test_gomp_list_is_this_process_usable_cpus():
    listed = [int(c) for c in affinity.gomp_list().split(",")]
    assert sorted(listed) == sorted(os.sched_getaffinity(0))
    assert len(affinity.gomp_list(1).split(",")) == 1
    with pytest.raises(ValueError):
        affinity.gomp_list(0)


@pytest.mark.parametrize("cores,world,expected", [
    (list(range(16)), 2, [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]),
    ([4, 5, 6, 7, 8], 2, [[4, 5, 6], [7, 8]]),  # a cpuset that starts at 4, with a remainder
    ([0, 1], 4, [[0], [1], [0], [1]]),  # more ranks than cores: shared, marked oversubscribed
])
def test_rank_cores_are_disjoint_slices_and_threads_are_the_smallest_slice(cores, world, expected):
    slices = [affinity.rank_cores(cores, rank, world) for rank in range(world)]
    assert [cpus for cpus, _ in slices] == expected
    assert all(over == (world > len(cores)) for _, over in slices)
    assert affinity.threads_per_rank(world, cores) == min(len(cpus) for cpus in expected)


def test_threads_per_rank_matches_the_usable_cores():
    usable = len(os.sched_getaffinity(0))
    assert affinity.threads_per_rank(1) == usable and affinity.threads_per_rank(usable + 1) == 1
