"""test_summarize: summarize.py and check_summary.py on made-up work
directories: a clean GPU run is ok, and each kind of wrong result is caught."""
import copy
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_summary  # noqa: E402
import summarize  # noqa: E402

LIMIT = 2 << 30
PHYS = 150754820096
LOSSES = [9.1, 9.05, 9.0, 8.97]
TOKENS = [[5, 7, 9, 11], [2, 4, 6, 8]]


def train_result(losses=LOSSES, status="ok", its=12.5, peak=2 * LIMIT):
    return {"status": status, "config": {"width": 1024, "layers": 6, "seq": 256, "batch": 13},
            "losses": losses, "losses_hex": [float(x).hex() for x in losses], "its": its,
            "max_memory_allocated": peak}


def infer_result(tokens=TOKENS, status="ok", rate=900.0, peak=2 * LIMIT):
    return {"status": status, "config": {"width": 1024, "layers": 8, "batch": 2, "steps": 4,
                                         "chunk": 64},
            "tokens": tokens, "tokens_sha256": "x", "tokens_per_s": rate,
            "max_memory_allocated": peak}


def vx_report(managed_peak=LIMIT, underflows=0):
    dev = {"device": 0, "physical_bytes": PHYS, "limit_bytes": LIMIT, "alloc_native": 10,
           "alloc_managed": 3 if managed_peak else 0, "native_bytes_peak": LIMIT,
           "managed_bytes_peak": managed_peak, "underflows": underflows}
    return {"vx": "0.1.0", "pid": 1, "tracked": 0, "devices": [dev]}


FACTS = {"procaddr_equal_after_init": True, "total_bytes": PHYS,
         "free_after_ctx_bytes": PHYS - (500 << 20), "free_after_cublas_bytes": PHYS - (600 << 20),
         "cukernel_param_info": "CUDA_SUCCESS", "cukernel_func_name": "CUDA_SUCCESS",
         "graph_node_kind": "kern",
         "batch_null_stream": {"prefetch_null": "CUDA_ERROR_INVALID_VALUE",
                               "prefetch_stream": "CUDA_SUCCESS",
                               "discard_null": "CUDA_ERROR_INVALID_VALUE",
                               "discard_stream": "CUDA_SUCCESS"},
         "managed_gbps": [{"bytes": 1 << 30, "prefetch_gbps": 50.0, "fault_gbps": 12.0}],
         "prefetch_gbps": 50.0, "fault_gbps": 12.0}


def clean_gpu_run():
    """Files and step exit codes of a GPU run where everything is right."""
    probe = {"libcuda": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "driver_version": 13000,
             "devices": [{"name": "NVIDIA H200", "total_mem": PHYS, "cc": "9.0",
                          "concurrent_managed": 1}]}
    files = {
        "uname.txt": "6.18.44\n",
        "smi.txt": "NVIDIA H200, 580.159.04, 143771 MiB\n",
        "nvcc.txt": "Cuda compilation tools, release 13.0, V13.0.48\n",
        "torch.txt": "2.11.0+cu130\n13.0\n",
        "probe.json": json.dumps(probe),
        "probe_vx.out": json.dumps(dict(probe, devices=[dict(probe["devices"][0],
                                                             total_mem=LIMIT)])),
        "oversub_oom.err": "vx_oversub: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY\n",
        "hooks.out": '{"launch_ns_added": 41.5, "alloc_free_ns_added": 300.0}\n',
        "train-ref.json": train_result(its=20.0),
        "train-oom.json": dict(train_result(status="oom"), error="CUDA out of memory"),
        "infer-ref.json": infer_result(rate=1000.0),
        "infer-oom.json": dict(infer_result(status="oom"), error="CUDA out of memory"),
        "facts.json": json.dumps(FACTS),
        "capture_table.out": "capture_probe: 0 cells where the driver is stricter than the "
                             "simulator's table, 2 where it is more lenient (deliberate)\n",
        "residency-base.txt": "600\n",
        "residency.txt": "".join("%d\n" % (600 + m) for m in (100, 1800, LIMIT >> 20, 900)),
    }
    rcs = {"debs": 0, "configure": 0, "build": 0, "probe": 0, "probe_vx": 0, "facts": 0, "capture_table": 0,
           "oversub_vx_linked": 0, "oversub_vx_dlsym": 0, "oversub_vx_procaddr": 0,
           "oversub_vx_nvme": 0, "oversub_native": 0, "oversub_oom": 2, "hooks": 0, "train-ref": 0, "train-oom": 3,
           "infer-ref": 0, "infer-oom": 3}
    for pol in summarize.POLICIES:
        files["train-%s.json" % pol] = train_result()
        files["infer-%s.json" % pol] = infer_result()
        rcs["train-" + pol] = rcs["infer-" + pol] = 0
        files["vxreport-train-%s.json" % pol] = files["vxreport-infer-%s.json" % pol] = vx_report()
    for lookup in summarize.OVERSUB_LOOKUPS + ("nvme",):
        files["vxreport-oversub_vx_%s.json" % lookup] = vx_report()
    return files, rcs


class Run:
    """A made-up work directory, summarized into an output directory."""

    def __init__(self, files, rcs, mode="gpu"):
        self.root = tempfile.mkdtemp(prefix="test_summarize.")
        self.work = os.path.join(self.root, "work")
        self.out = os.path.join(self.root, "out")
        os.makedirs(self.work)
        os.makedirs(self.out)
        for name, content in files.items():
            with open(os.path.join(self.work, name), "w") as f:
                f.write(content if isinstance(content, str) else json.dumps(content))
        with open(os.path.join(self.work, "steps.jsonl"), "w") as f:
            for step, rc in rcs.items():
                skipped = rc is None
                f.write(json.dumps({"step": step, "rc": -1 if skipped else rc, "secs": 1.0,
                                    "skipped": skipped}) + "\n")
        self.rc = summarize.main(["--work", self.work, "--out", self.out, "--limit", str(LIMIT),
                                  "--mode", mode])
        with open(os.path.join(self.out, "summary.json")) as f:
            self.summary = json.load(f)

    def close(self):
        shutil.rmtree(self.root)


class SummarizeTest(unittest.TestCase):
    def run_with(self, change=None, mode="gpu"):
        files, rcs = clean_gpu_run()
        if change:
            change(files, rcs)
        run = Run(files, rcs, mode)
        self.addCleanup(run.close)
        return run

    def assertWrong(self, run, text):
        self.assertFalse(run.summary["ok"])
        self.assertEqual(run.rc, 1)
        self.assertTrue(any(text in w for w in run.summary["wrong"]),
                        "%r not in %r" % (text, run.summary["wrong"]))

    def assertIncomplete(self, run, text):
        self.assertFalse(run.summary["ok"])
        self.assertEqual(run.summary["wrong"], [])
        self.assertTrue(any(text in w for w in run.summary["incomplete"]),
                        "%r not in %r" % (text, run.summary["incomplete"]))

    def test_clean_run_is_ok_and_passes_check_summary(self):
        run = self.run_with()
        s = run.summary
        self.assertTrue(s["ok"], (s["wrong"], s["incomplete"]))
        self.assertEqual(run.rc, 0)
        self.assertEqual(s["gpu"], "NVIDIA H200")
        self.assertEqual(s["driver"], "580.159.04")
        self.assertEqual(s["cuda"], {"driver_api": 13000, "driver_api_version": "13.0",
                                     "nvcc": "13.0"})
        self.assertEqual(s["torch"], "2.11.0+cu130")
        self.assertEqual(s["vx_reported_total"], LIMIT)
        self.assertEqual(s["train"]["ideal_its"], 20.0)
        self.assertEqual(s["train"]["predict_its"], 12.5)
        self.assertEqual(s["train"]["loss_match"], "exact")
        self.assertIs(s["train"]["oom_without_vx"], True)
        self.assertEqual(s["train"]["footprint_x_limit"], 2.0)
        self.assertEqual(s["infer"]["tokens_match"], "exact")
        self.assertEqual(s["infer"]["ideal_tokens_per_s"], 1000.0)
        self.assertEqual(s["hooks"]["launch_ns_added"], 41.5)
        self.assertIs(s["oversub"]["vx_report"]["dlsym"]["spilled"], True)
        self.assertEqual(s["train"]["vx_report"]["predict"]["managed_bytes_peak"], LIMIT)
        self.assertEqual(check_summary.main([run.out, "--mode", "gpu", "--rc", "0"]), 0)
        with open(os.path.join(run.out, "losses.json")) as f:
            losses = json.load(f)
        self.assertEqual(losses["train"]["ref"]["losses"], LOSSES)
        self.assertEqual(set(losses["train"]), {"ref", "demand", "static", "predict"})

    def test_oversub_data_mismatch_is_wrong(self):
        run = self.run_with(lambda f, r: r.update(oversub_vx_dlsym=1))
        self.assertEqual(run.summary["oversub"]["with_vx"], "dlsym: DATA MISMATCH")
        self.assertEqual(run.summary["oversub"]["with_vx_by_lookup"]["linked"], "pass")
        self.assertWrong(run, "DATA MISMATCH")
        self.assertEqual(check_summary.main([run.out, "--mode", "gpu", "--rc", "1"]), 1)

    def test_nvme_leg_data_mismatch_is_wrong(self):
        run = self.run_with(lambda f, r: r.update(oversub_vx_nvme=1))
        self.assertWrong(run, "NVMe tier: DATA MISMATCH")

    def test_oversub_cuda_error_under_vx_is_wrong(self):
        def change(f, r):
            r["oversub_vx_procaddr"] = 2
            f["oversub_vx_procaddr.out"] = "vx_oversub: cuMemcpyHtoD_v2: CUDA_ERROR_ILLEGAL_ADDRESS\n"
        run = self.run_with(change)
        self.assertWrong(run, "CUDA_ERROR_ILLEGAL_ADDRESS")

    def test_losses_off_by_more_than_1e5_are_wrong(self):
        bad = [LOSSES[0], LOSSES[1] + 1e-3] + LOSSES[2:]
        run = self.run_with(lambda f, r: f.update({"train-static.json": train_result(bad)}))
        self.assertEqual(run.summary["train"]["loss_match"], "MISMATCH")
        self.assertEqual(run.summary["train"]["loss_match_by_policy"]["static"], "MISMATCH")
        self.assertWrong(run, "VX_POLICY=static")

    def test_losses_within_1e5_are_right_but_not_exact(self):
        near = [x + 1e-7 for x in LOSSES]
        run = self.run_with(lambda f, r: f.update({"train-demand.json": train_result(near)}))
        self.assertTrue(run.summary["ok"])
        self.assertEqual(run.summary["train"]["loss_match"], "1e-5")

    def test_different_token_is_wrong(self):
        bad = [TOKENS[0], [2, 4, 3, 8]]
        run = self.run_with(lambda f, r: f.update({"infer-predict.json": infer_result(bad)}))
        self.assertEqual(run.summary["infer"]["tokens_match_by_policy"]["predict"],
                         "MISMATCH (sequence 1, step 2)")
        self.assertWrong(run, "infer under vx (VX_POLICY=predict)")

    def test_crashed_vx_leg_is_wrong_timeout_is_incomplete(self):
        def crash(f, r):
            r["train-demand"] = 139
            del f["train-demand.json"]
        self.assertWrong(self.run_with(crash), "killed by signal 11")

        def slow(f, r):
            r["infer-static"] = 124
            del f["infer-static.json"]
        self.assertIncomplete(self.run_with(slow), "timeout")

    def test_oom_not_shown_is_incomplete(self):
        def change(f, r):
            r["train-oom"] = 0
            f["train-oom.json"] = train_result()
        self.assertIncomplete(self.run_with(change), "did not raise torch.cuda.OutOfMemoryError")
        self.assertIncomplete(self.run_with(lambda f, r: r.update(oversub_oom=0)),
                              "CUDA_ERROR_OUT_OF_MEMORY")

    def test_footprint_within_limit_is_incomplete(self):
        small = lambda f, r: f.update({"train-ref.json": train_result(peak=LIMIT // 2)})
        self.assertIncomplete(self.run_with(small), "not past the limit")

    def test_simulated_driver_on_gpu_run_is_wrong(self):
        def change(f, r):
            probe = json.loads(f["probe.json"])
            probe["libcuda"] = "/src/build-gpu/tests/simcuda/libcuda.so.1"
            f["probe.json"] = json.dumps(probe)
        self.assertWrong(self.run_with(change), "simulated driver")

    def test_skipped_and_failed_build_are_incomplete(self):
        self.assertIncomplete(self.run_with(lambda f, r: r.update(configure=1)), "configure: exit 1")
        missing = lambda f, r: f.update({"missing.txt": "/b/libvx.so\n"})
        self.assertIncomplete(self.run_with(missing), "not built: /b/libvx.so")
        # A failed build whose outputs exist anyway (another target broke) is no verdict.
        self.assertTrue(self.run_with(lambda f, r: r.update(build=2)).summary["ok"])
        self.assertIncomplete(self.run_with(lambda f, r: r.update(hooks=None)), "skipped")

    def test_vx_that_did_not_act_is_caught(self):
        run = self.run_with(lambda f, r: f.pop("vxreport-oversub_vx_linked.json"))
        self.assertIncomplete(run, "vx wrote no exit report")
        run = self.run_with(lambda f, r: f.update({"vxreport-train-demand.json": vx_report(0)}))
        self.assertIncomplete(run, "vx placed nothing past the limit")
        run = self.run_with(lambda f, r: f.update({"vxreport-infer-static.json":
                                                   vx_report(underflows=2)}))
        self.assertWrong(run, "underflowed 2 times")

    def test_vx_reporting_physical_memory_is_wrong(self):
        def change(f, r):
            f["probe_vx.out"] = f["probe.json"]
        self.assertWrong(self.run_with(change), "not the limit")

    def test_hooks_without_figures_is_incomplete(self):
        run = self.run_with(lambda f, r: f.update({"hooks.out": "nothing\n"}))
        self.assertIncomplete(run, "no launch_ns_added")

    def test_facts_are_copied_and_their_absence_is_incomplete(self):
        run = self.run_with()
        for k, v in FACTS.items():
            if k != "total_bytes":
                self.assertEqual(run.summary[k], v, k)
        run = self.run_with(lambda f, r: (f.pop("facts.json"), r.update(facts=1)))
        self.assertIncomplete(run, "facts: exit 1")
        self.assertIsNone(run.summary["cukernel_param_info"])

    def test_capture_table_verdict(self):
        run = self.run_with()
        self.assertEqual((run.summary["capture_stricter_cells"],
                          run.summary["capture_lenient_cells"]), (0, 2))
        run = self.run_with(lambda f, r: (f.update({"capture_table.out": f["capture_table.out"]
                                                    .replace(": 0 cells", ": 3 cells")}),
                                          r.update(capture_table=1)))
        self.assertIn("3 cells", run.summary["simulator_defects"][0])
        run = self.run_with(lambda f, r: f.pop("capture_table.out"))
        self.assertIncomplete(run, "capture_table")

    def test_residency_above_limit_plus_outside_is_caught(self):
        run = self.run_with()
        self.assertTrue(run.summary["residency_within_limit"])
        self.assertEqual(run.summary["residency_peak_bytes"], LIMIT)
        over = (LIMIT >> 20) + 700  # cuBLAS and the context take 600 MiB outside vx's budget
        run = self.run_with(lambda f, r: f.update({"residency.txt": "%d\n" % (600 + over)}))
        self.assertFalse(run.summary["residency_within_limit"])
        run = self.run_with(lambda f, r: f.pop("residency.txt"))
        self.assertIncomplete(run, "no NVML samples")

    def test_sim_mode_needs_no_torch(self):
        def change(f, r):
            probe = json.loads(f["probe.json"])
            probe["libcuda"] = "/b/tests/simcuda/libcuda.so.1"
            f["probe.json"] = json.dumps(probe)
            for k in list(f):
                if k.startswith(("train", "infer", "torch", "smi", "nvcc")):
                    del f[k]
            for k in list(r):
                if k.startswith(("train", "infer")):
                    del r[k]
        run = self.run_with(change, mode="sim")
        self.assertTrue(run.summary["ok"], (run.summary["wrong"], run.summary["incomplete"]))
        self.assertNotIn("train", run.summary)
        self.assertEqual(check_summary.main([run.out, "--mode", "sim", "--rc", "0"]), 0)
        self.assertEqual(check_summary.main([run.out, "--mode", "gpu", "--rc", "0"]), 1)


if __name__ == "__main__":
    unittest.main()
