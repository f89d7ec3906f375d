#!/usr/bin/env python3
"""test_tracer.py: tools/torch_trace.py's dispatch-mode tracer on small meta
programs: which chunks each op reads and writes, storage lifetimes, views.
Needs torch (scripts/model-traces.sh makes .venv-models); exits 77 (skip)
without it."""
import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
try:
    import torch
except ImportError:
    print("traces_tracer: no torch (run scripts/model-traces.sh to make .venv-models)", file=sys.stderr)
    sys.exit(77)
import torch_trace as tt  # noqa: E402

MiB = 1 << 20


def launches(tr):
    """The written trace's LAUNCH records as [(kernel, [(alloc, first, count, mode)])]."""
    d, pos, out = tr.finish(), 40, []
    while pos < len(d):
        typ, n = struct.unpack_from("<B3xI", d, pos)
        pos += 8
        if typ == 3:
            k, nr = struct.unpack_from("<8xQ16xI", d, pos)[0], struct.unpack_from("<I", d, pos + 36)[0]
            rs = [struct.unpack_from("<QIII", d, pos + 40 + 24 * i) for i in range(nr)]
            out.append((k, rs))
        pos += n
    return out


class Tracer(unittest.TestCase):
    def run_ops(self, fn):
        tr = tt.make_tracer()()
        with tr, torch.device("meta"):
            fn()
        return tr

    def test_fresh_output_written_input_read(self):
        def f():
            x = torch.empty(MiB)  # 4 MiB from a 20 MiB segment, no kernel
            x.fill_(1)  # overwrites: write-only
            y = x + 1  # reads x, writes y (the next 4 MiB of the segment)
            x.add_(y)  # in place: read-write
            del y

        ls = launches(self.run_ops(f))
        self.assertEqual(len(ls), 3)
        self.assertEqual(ls[0][1], [(1, 0, 2, tt.WRITE)])
        self.assertEqual(ls[1][1], [(1, 0, 2, tt.READ), (1, 2, 2, tt.WRITE)])
        self.assertEqual(ls[2][1], [(1, 0, 2, tt.RW), (1, 2, 2, tt.READ)])

    def test_views_launch_nothing_and_reach_only_their_bytes(self):
        def f():
            x = torch.zeros(4 * MiB)  # 16 MiB, chunks 0-7
            v = x[MiB : 2 * MiB]  # a view: bytes 4-8 MiB
            v.t()
            v.mul_(2)

        ls = launches(self.run_ops(f))
        self.assertEqual(len(ls), 2)  # zeros, mul_: the slicing and t() launch nothing
        self.assertEqual(ls[1][1], [(1, 2, 2, tt.RW)])

    def test_freed_storage_is_reused(self):
        tr = None

        def f():
            for _ in range(3):
                a = torch.ones(3 * MiB)  # 12 MiB
                b = a * 2
                del a, b

        tr = self.run_ops(f)
        tr.finish()
        self.assertEqual(len(tr.alloc.segments), 2)  # the second and third passes reuse them
        self.assertEqual(tr.alloc.allocated, 0)

    def test_training_iterations_settle(self):
        def f():
            m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024))
            opt = torch.optim.AdamW(m.parameters(), foreach=True)
            for i in range(3):
                m(torch.randn(512, 1024)).sum().backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                if i == 1:
                    self.after_two = len(tr_box[0].alloc.segments)

        tr_box = [tt.make_tracer()()]
        with tr_box[0], torch.device("meta"):
            f()
        self.assertEqual(len(tr_box[0].alloc.segments), self.after_two)  # no new segment in iteration 3
        self.assertGreater(tr_box[0].ops.get("_foreach", 0), 0)

    def test_cpu_tensors_are_not_traced(self):
        def f():
            torch.ones(10, device="cpu").add_(1)

        self.assertEqual(launches(self.run_ops(f)), [])


if __name__ == "__main__":
    unittest.main(verbosity=1)
