"""The caching-allocator model against the rules of PyTorch's CUDACachingAllocator.cpp (defaults)."""

from jupyter_quota.estimator.allocator import CachingAllocator, replay, round_size, segment_size

MIB = 1 << 20


def test_rounding_and_segment_sizes():
    assert round_size(1) == 512
    assert round_size(512) == 512
    assert round_size(513) == 1024
    assert segment_size(512) == 2 * MIB  # small pool: 2 MiB segments
    assert segment_size(MIB) == 2 * MIB
    assert segment_size(MIB + 512) == 20 * MIB  # 1-10 MiB: a 20 MiB segment
    assert segment_size(10 * MIB - 512) == 20 * MIB
    assert segment_size(10 * MIB) == 10 * MIB  # from 10 MiB: rounded up to 2 MiB
    assert segment_size(11 * MIB) == 12 * MIB


def test_small_requests_share_a_segment():
    a = CachingAllocator()
    a.malloc("x", 100)
    a.malloc("y", 600_000)
    a.malloc("z", 600_000)
    assert a.reserved == 2 * MIB and a.segments == 1
    assert a.allocated == 512 + 2 * round_size(600_000)
    a.malloc("w", 900_000)  # does not fit in what is left: a second small segment
    assert a.reserved == 4 * MIB and a.segments == 2


def test_large_pool_splits_only_when_more_than_one_mib_is_left():
    a = CachingAllocator()
    a.malloc("x", 5 * MIB)  # a 20 MiB segment, split: 15 MiB cached
    a.malloc("y", 5 * MIB)  # reuses the remainder
    assert a.reserved == 20 * MIB and a.allocated == 10 * MIB
    b = CachingAllocator()
    b.malloc("x", 11 * MIB + MIB // 2)  # a 12 MiB segment; 0.5 MiB left is not split off
    assert b.reserved == 12 * MIB and b.allocated == 12 * MIB
    assert b.requested == 11 * MIB + MIB // 2


def test_freed_neighbours_merge_and_best_fit_reuse():
    a = CachingAllocator()
    a.malloc("x", 8 * MIB)
    a.malloc("y", 8 * MIB)  # both in one 20 MiB segment, 4 MiB cached
    a.free("x")
    a.free("y")  # merges back into one 20 MiB block
    a.malloc("z", 18 * MIB)
    assert a.reserved == 20 * MIB and a.segments == 1
    assert a.peak_allocated == 18 * MIB


def test_fragmentation_makes_reserved_exceed_allocated():
    # Two 12 MiB segments each half freed: a 14 MiB request fits in neither hole and needs a new segment.
    events = [("a", 1, 12 * MIB), ("a", 2, 12 * MIB), ("f", 1, 0), ("a", 3, 6 * MIB), ("a", 4, 14 * MIB)]
    a = replay(events)
    assert a.peak_reserved == 12 * MIB + 12 * MIB + 14 * MIB
    assert a.peak_allocated < a.peak_reserved


def test_a_full_device_returns_wholly_free_segments_first():
    events = [("a", 1, 12 * MIB), ("a", 2, 12 * MIB), ("f", 1, 0), ("a", 3, 14 * MIB)]
    unlimited = replay(events)
    assert unlimited.peak_reserved == 38 * MIB and unlimited.releases == 0
    bounded = replay(events, capacity=30 * MIB)  # 24 + 14 > 30: the free 12 MiB segment goes back first
    assert bounded.peak_reserved == 26 * MIB and bounded.releases == 1
    assert bounded.reserved == 26 * MIB and bounded.segments == 2
