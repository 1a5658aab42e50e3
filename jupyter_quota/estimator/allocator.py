"""A model of PyTorch's CUDA caching allocator, for replaying a simulated step's allocations.

It follows ``c10/cuda/CUDACachingAllocator.cpp`` with its default settings (no
``PYTORCH_CUDA_ALLOC_CONF``: no ``max_split_size_mb``, no ``expandable_segments``, no power-of-two
rounding, one stream): every request is rounded up to 512 bytes; requests of at most 1 MiB come
from the small pool, carved from 2 MiB segments; larger ones from the large pool, whose new
segments are 20 MiB for requests under 10 MiB and the request rounded up to 2 MiB otherwise. A
request takes the smallest cached free block that fits (best fit, by size then address) and
splits it when the rest is at least 512 bytes (small pool) or more than 1 MiB (large pool); a
freed block merges with free neighbours of its segment. Segments are returned only when a new one
would not fit in the device (``capacity``): then every wholly free segment is (``cudaMalloc``
failed, ``release_cached_blocks``).

``allocated`` counts blocks as PyTorch's ``allocated_bytes`` stat does (the block's size, so an
unsplit remainder counts), ``reserved`` the segments (``reserved_bytes``): their peaks are
``max_memory_allocated`` and ``max_memory_reserved``. xMem (arXiv 2510.21048) replays a CPU
run's allocations through such a model the same way. Pure Python: no torch needed.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 << 20  # kSmallSize: largest small-pool request
SMALL_BUFFER = 2 << 20  # kSmallBuffer: small-pool segment
LARGE_BUFFER = 20 << 20  # kLargeBuffer: segment for requests of 1-10 MiB
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge


def round_size(nbytes: int) -> int:
    """A request's block size (``round_size``)."""
    if nbytes < MIN_BLOCK:
        return MIN_BLOCK
    return MIN_BLOCK * -(-nbytes // MIN_BLOCK)


def segment_size(size: int) -> int:
    """The ``cudaMalloc`` size of a new segment for a rounded request (``get_allocation_size``)."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * -(-size // ROUND_LARGE)


@dataclass(eq=False)
class _Block:
    addr: int
    size: int
    small: bool
    free: bool = True
    prev: _Block | None = None
    next: _Block | None = None


@dataclass
class CachingAllocator:
    """Replays ``malloc(key, nbytes)`` and ``free(key)`` events; keeps the allocator's statistics."""

    allocated: int = 0
    reserved: int = 0
    peak_allocated: int = 0
    peak_reserved: int = 0
    segments: int = 0
    requested: int = 0  # live bytes as requested (no rounding)
    peak_requested: int = 0
    #: the device's memory: a new segment beyond it first returns the cached free segments, as the
    #: allocator does when cudaMalloc fails (None: unlimited, the cache is never returned)
    capacity: int | None = None
    releases: int = 0
    _pools: dict = field(default_factory=lambda: {True: [], False: []})  # sorted (size, addr) of free blocks
    _blocks: dict = field(default_factory=dict)  # addr -> free block
    _live: dict = field(default_factory=dict)  # key -> (block, nbytes)
    _top: int = 0

    def malloc(self, key, nbytes: int) -> None:
        if nbytes <= 0 or key in self._live:
            return
        size = round_size(nbytes)
        small = size <= SMALL_SIZE
        pool = self._pools[small]
        i = bisect_left(pool, (size, -1))
        if i < len(pool):
            _, addr = pool.pop(i)
            block = self._blocks.pop(addr)
        else:
            seg = segment_size(size)
            if self.capacity is not None and self.reserved + seg > self.capacity:
                self._release_cached()
            block = _Block(self._top, seg, small)
            self._top += seg
            self.reserved += seg
            self.segments += 1
            self.peak_reserved = max(self.peak_reserved, self.reserved)
        rest = block.size - size
        if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
            tail = _Block(block.addr + size, rest, small, True, block, block.next)
            if block.next is not None:
                block.next.prev = tail
            block.next = tail
            block.size = size
            self._cache(tail)
        block.free = False
        self._live[key] = (block, nbytes)
        self.allocated += block.size
        self.requested += nbytes
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_requested = max(self.peak_requested, self.requested)

    def free(self, key) -> None:
        entry = self._live.pop(key, None)
        if entry is None:
            return
        block, nbytes = entry
        self.allocated -= block.size
        self.requested -= nbytes
        block.free = True
        for other in (block.prev, block.next):
            if other is not None and other.free:
                self._uncache(other)
                if other is block.prev:
                    other.size += block.size
                    other.next = block.next
                    if block.next is not None:
                        block.next.prev = other
                    block = other
                else:
                    block.size += other.size
                    block.next = other.next
                    if other.next is not None:
                        other.next.prev = block
        self._cache(block)

    def _release_cached(self) -> None:
        """``release_cached_blocks``: return every wholly free segment (``cudaMalloc`` failed)."""
        for pool in self._pools.values():
            for _size, addr in list(pool):
                block = self._blocks[addr]
                if block.prev is None and block.next is None:
                    self._uncache(block)
                    self.reserved -= block.size
                    self.segments -= 1
        self.releases += 1

    def _cache(self, block: _Block) -> None:
        insort(self._pools[block.small], (block.size, block.addr))
        self._blocks[block.addr] = block

    def _uncache(self, block: _Block) -> None:
        pool = self._pools[block.small]
        del pool[bisect_left(pool, (block.size, block.addr))]
        del self._blocks[block.addr]

    def stats(self) -> dict:
        return {
            "peakRequested": self.peak_requested,
            "peakAllocated": self.peak_allocated,
            "peakReserved": self.peak_reserved,
            "segments": self.segments,
            "releases": self.releases,
        }


def replay(events, capacity: int | None = None) -> CachingAllocator:
    """Replay ``(op, key, nbytes)`` events (``op`` ``"a"`` allocates, ``"f"`` frees) in order."""
    model = CachingAllocator(capacity=capacity)
    for op, key, nbytes in events:
        if op == "a":
            model.malloc(key, nbytes)
        else:
            model.free(key)
    return model
