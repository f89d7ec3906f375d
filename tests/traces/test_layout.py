#!/usr/bin/env python3
"""test_layout.py [VX]: tools/torch_trace.py's caching-allocator layout and
VXTRACE writer on a synthetic op list, without torch. With VX (build/vx), the
written trace must decode and replay with the project's decoder."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import torch_trace as tt  # noqa: E402

MiB = 1 << 20
VX = sys.argv[1] if len(sys.argv) > 1 else None


class Sizes(unittest.TestCase):
    def test_rounding(self):
        self.assertEqual(tt.round_size(1), 512)
        self.assertEqual(tt.round_size(512), 512)
        self.assertEqual(tt.round_size(513), 1024)

    def test_segment_sizes(self):
        self.assertEqual(tt.allocation_size(4), 2 * MiB)
        self.assertEqual(tt.allocation_size(MiB), 2 * MiB)
        self.assertEqual(tt.allocation_size(MiB + 512), 20 * MiB)
        self.assertEqual(tt.allocation_size(10 * MiB - 512), 20 * MiB)
        self.assertEqual(tt.allocation_size(10 * MiB), 10 * MiB)
        self.assertEqual(tt.allocation_size(11 * MiB + 1), 12 * MiB)


class Allocator(unittest.TestCase):
    def setUp(self):
        self.segs = []
        self.a = tt.CachingAllocator(self.segs.append)

    def test_small_blocks_share_a_segment(self):
        b1, b2 = self.a.malloc(100), self.a.malloc(1000)
        self.assertIs(b1.seg, b2.seg)
        self.assertEqual((b1.off, b1.size, b2.off, b2.size), (0, 512, 512, 1024))
        self.assertEqual(len(self.segs), 1)
        self.assertEqual(self.segs[0].size, 2 * MiB)
        self.assertTrue(self.segs[0].small)

    def test_large_split_and_reuse(self):
        b1 = self.a.malloc(5 * MiB)
        self.assertEqual((b1.seg.size, b1.off, b1.size), (20 * MiB, 0, 5 * MiB))
        b2 = self.a.malloc(5 * MiB)
        self.assertIs(b2.seg, b1.seg)
        self.assertEqual(b2.off, 5 * MiB)
        self.a.free(b1)
        b3 = self.a.malloc(4 * MiB)  # best fit: the freed 5 MiB, not the 10 MiB tail
        self.assertEqual((b3.seg, b3.off), (b1.seg, 0))
        self.assertEqual(len(self.segs), 1)

    def test_large_no_split_of_small_remainder(self):
        b = self.a.malloc(19 * MiB + MiB // 2)  # own segment of 20 MiB, 0.5 MiB left: kept whole
        self.assertEqual((b.seg.size, b.size), (20 * MiB, 20 * MiB))
        self.assertEqual(len(self.a.pools[False]), 0)

    def test_small_and_large_pools_apart(self):
        self.a.malloc(5 * MiB)  # leaves a 15 MiB free block in the large pool
        s = self.a.malloc(4096)
        self.assertTrue(s.seg.small)
        self.assertEqual(len(self.segs), 2)

    def test_free_merges_neighbours(self):
        bs = [self.a.malloc(3 * MiB) for _ in range(3)]
        for b in (bs[0], bs[2], bs[1]):
            self.a.free(b)
        self.assertEqual([(p[0], p[3].off) for p in self.a.pools[False]], [(20 * MiB, 0)])
        b = self.a.malloc(18 * MiB)
        self.assertEqual((b.off, len(self.segs)), (0, 1))

    def test_segments_never_released(self):
        b = self.a.malloc(64 * MiB)
        self.a.free(b)
        self.assertEqual(self.a.reserved, 64 * MiB)
        self.assertIs(self.a.malloc(60 * MiB).seg, b.seg)


class Ranges(unittest.TestCase):
    def setUp(self):
        self.a = tt.CachingAllocator()

    def test_write_alone_in_chunk_is_write_only(self):
        b = self.a.malloc(4 * MiB)
        r = tt.chunk_ranges([(b, 0, 4 * MiB, tt.WRITE)])
        self.assertEqual(r, [(b.seg.sid, 0, 2, tt.WRITE)])

    def test_write_sharing_a_chunk_with_live_data_reads_it(self):
        b1 = self.a.malloc(3 * MiB)  # chunk 1 also holds b2's first MiB
        b2 = self.a.malloc(3 * MiB)
        r = tt.chunk_ranges([(b1, b1.off, b1.off + b1.nbytes, tt.WRITE)])
        self.assertEqual(r, [(b1.seg.sid, 0, 1, tt.WRITE), (b1.seg.sid, 1, 1, tt.RW)])
        self.a.free(b2)  # a free neighbour's bytes need no preserving
        r = tt.chunk_ranges([(b1, b1.off, b1.off + b1.nbytes, tt.WRITE)])
        self.assertEqual(r, [(b1.seg.sid, 0, 2, tt.WRITE)])

    def test_read_and_write_of_one_chunk_merge(self):
        b1, b2 = self.a.malloc(1000), self.a.malloc(1000)
        r = tt.chunk_ranges([(b1, b1.off, b1.off + 1000, tt.READ), (b2, b2.off, b2.off + 1000, tt.WRITE)])
        self.assertEqual(r, [(b1.seg.sid, 0, 1, tt.RW)])

    def test_view_reaches_only_its_chunks(self):
        b = self.a.malloc(64 * MiB)
        r = tt.chunk_ranges([(b, 10 * MiB, 13 * MiB, tt.READ)])
        self.assertEqual(r, [(b.seg.sid, 5, 2, tt.READ)])

    def test_durations(self):
        self.assertEqual(tt.dur_ns(0, 0), tt.LAUNCH_NS)
        self.assertEqual(tt.dur_ns(400e12, 0), 10**9 + tt.LAUNCH_NS)
        self.assertEqual(tt.dur_ns(0, 3e12), 10**9 + tt.LAUNCH_NS)


class Synthetic(unittest.TestCase):
    """A toy training loop as an op list: weights, then per iteration fresh
    activations (freed after backward) and an in-place update."""

    def make(self):
        w = tt.TraceWriter()
        a = tt.CachingAllocator(w.alloc)
        weights = [a.malloc(24 * MiB) for _ in range(4)]
        for it in range(3):
            acts = []
            for x in weights:
                y = a.malloc(12 * MiB)
                acts.append(y)
                regions = [(x, x.off, x.off + x.nbytes, tt.READ), (y, y.off, y.off + y.nbytes, tt.WRITE)]
                w.launch(tt.fnv1a("fwd"), tt.dur_ns(1e12, 36 * MiB), tt.chunk_ranges(regions))
            for x, y in zip(reversed(weights), reversed(acts)):
                regions = [(y, y.off, y.off + y.nbytes, tt.READ), (x, x.off, x.off + x.nbytes, tt.RW)]
                w.launch(tt.fnv1a("bwd"), tt.dur_ns(2e12, 36 * MiB), tt.chunk_ranges(regions))
                a.free(y)
        return w, a, w.finish(a.reserved // 2 // tt.CHUNK * tt.CHUNK)

    def test_layout_settles(self):
        w, a, data = self.make()
        self.assertEqual(len(a.segments), 4 + 4)  # activations reuse their segments
        self.assertEqual(w.nlaunch, 24)
        self.assertEqual(data[:8], b"VXTRACE\0")

    @unittest.skipUnless(VX, "no vx binary given")
    def test_replays(self):
        _, a, data = self.make()
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "toy.vxt")
            with open(p, "wb") as f:
                f.write(data)
            out = subprocess.run(
                [VX, "replay", p, "--policy", "demand,bound", "--json"], capture_output=True, text=True, check=True
            ).stdout
        res = {o["policy"]: o for o in map(json.loads, out.splitlines())}
        self.assertEqual(res["demand"]["capacity"], a.reserved // 2)
        self.assertGreater(res["demand"]["bytes_up"], 0)
        self.assertLessEqual(res["bound"]["total_s"], res["demand"]["total_s"])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=1)
