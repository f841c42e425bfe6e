#!/usr/bin/env python3
"""kernel_trace_summary.py against traces whose answers are worked out by hand (ctest runs this, no
GPU needed). A trace of 12 replays of one graph, each: kernel A for 10 us (kernel D runs beside it
from 2 to 6 us: busy time is a union, not a sum), 2 us idle, kernel B for 8 us, a memset for 1 us,
4 us idle, kernel C for 5 us (span 30, busy 24, idle 6); between replays 5 us idle, an eager kernel E
for 50 us, 10 us idle (65 between, 50 busy). A second trace is the same with B 10% slower."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.dont_write_bytecode = True  # no __pycache__ in the source tree from a ctest run
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_trace_summary as kts  # noqa: E402

US = 1000  # ns


def write_trace(path, b_us=8.0, replays=12, graph=5):
    lines = ["device\tkind\tgraph\tcorrelation\tstart_ns\tend_ns\tbytes\tname"]
    t = 1_000_000
    for r in range(replays):
        corr = 100 + r
        b_end = 12 + b_us
        for kind, name, s, e in (("K", "kernel_A(int)", 0, 10), ("K", "kernel_D(int)", 2, 6), ("K", "kernel_B(int)", 12, b_end),
                                 ("M", "memset", b_end, b_end + 1), ("K", "kernel_C(int)", b_end + 5, b_end + 10)):
            lines.append(f"0\t{kind}\t{graph}\t{corr}\t{t + int(s * US)}\t{t + int(e * US)}\t0\t{name}")
        t += int((b_end + 10) * US)
        lines.append(f"0\tK\t0\t{900 + r}\t{t + 5 * US}\t{t + 55 * US}\t0\teager_E(float*)")
        t += 65 * US
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


class KnownAnswers(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.a = os.path.join(self.dir.name, "a.tsv")
        self.b = os.path.join(self.dir.name, "b.tsv")
        write_trace(self.a)
        write_trace(self.b, b_us=8.8)

    def tearDown(self):
        self.dir.cleanup()

    def test_per_replay_table(self):
        _, _, rows = kts.load(self.a)
        table, n, mode = kts.per_replay(rows, skip=2)
        self.assertEqual((n, mode), (10, "graph replays"))
        self.assertNotIn("eager_E(float*)", table, "work outside the graph is not part of a replay")
        calls, mean_us, ms = table["kernel_B(int)"]
        self.assertEqual(calls, 1.0)
        self.assertAlmostEqual(mean_us, 8.0, places=6)
        self.assertAlmostEqual(ms, 0.008, places=9)
        self.assertAlmostEqual(table["memset"][2], 0.001, places=9)

    def test_per_step_table(self):
        # Steps start at kernel_A: 12 markers, 2 steps left out, the tail after the last marker (one
        # replay and its eager E) dropped, so 9 whole steps, each one A..C replay and one E.
        _, _, rows = kts.load(self.a)
        table, n, mode = kts.per_replay(rows, skip=2, marker=r"kernel_A")
        self.assertEqual(n, 9)
        self.assertTrue(mode.startswith("steps"))
        self.assertEqual(table["eager_E(float*)"][0], 1.0, "the eager work between replays is part of a step")
        self.assertAlmostEqual(table["eager_E(float*)"][2], 0.050, places=9)
        self.assertEqual(table["kernel_B(int)"][0], 1.0)
        self.assertAlmostEqual(sum(v[2] for v in table.values()), 0.028 + 0.050, places=9)

    def test_gaps(self):
        _, _, rows = kts.load(self.a)
        stats, gaps, between, n = kts.replay_gaps(rows, skip=2)
        self.assertEqual(n, 10)
        expect = {"replay span": 30, "  kernels + memsets busy": 24, "  idle inside the replay": 6,
                  "between replays": 65, "  busy between": 50, "  idle between": 15, "step (span + between)": 95}
        for key, value in expect.items():
            self.assertAlmostEqual(stats[key], value, places=6, msg=key)
        # Idle before each position: D inside A's time, B 2 us after A ends, the memset right after
        # B, C 4 us after the memset.
        self.assertEqual([round(gaps[k][0], 6) for k in (1, 2, 3, 4)], [0.0, 2.0, 0.0, 4.0])
        self.assertEqual(gaps[4][1], ("memset", "kernel_C(int)"))
        self.assertAlmostEqual(between["eager_E(float*)"], 50.0, places=6)

    def test_compare_finds_the_slower_kernel(self):
        out = io.StringIO()
        with redirect_stdout(out):
            kts.print_compare(self.b, self.a, skip=2, top=5)
        text = out.getvalue()
        # B is 0.8 us slower a replay: +0.0008 ms, ratio 1.1; the others (A, C, D, the memset)
        # unchanged, so the median ratio is 1; the replay's 28 us of kernel and memset time (summed,
        # D included) grow by 0.8 / 28 = 2.86%.
        self.assertIn("A - B +0.001 (+2.86%)", text)
        row = next(l for l in text.splitlines() if "kernel_B" in l)
        self.assertIn("+0.0008", row)
        self.assertIn("1.100", row)
        self.assertIn("median ratio A / B over 5 kernels in both: 1.0000", text)


if __name__ == "__main__":
    unittest.main()
