"""check_summary: asserts that a gpu-check.sh output directory holds a
complete, ok summary.json (the simulator form in CI, or a GPU run's $OUT).

    check_summary.py OUTDIR --mode sim|gpu [--rc N]

Exit 0 when every assertion holds; otherwise it names each failed one and
prints the end of OUTDIR/log.txt.
"""
import argparse
import json
import os
import sys

COMMON_STEPS = ("probe", "probe_vx", "facts", "capture_table", "oversub_vx_linked", "oversub_vx_dlsym",
                "oversub_vx_procaddr", "oversub_vx_nvme", "oversub_native", "hooks")
POLICIES = ("demand", "static", "predict")


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_common(s, mode, fail):
    fail(s.get("ran") is True, "ran is true")
    fail(s.get("mode") == mode, "mode is %r" % mode)
    fail(isinstance(s.get("gpu"), str) and s["gpu"], "gpu names the device")
    fail(s.get("driver"), "driver is stated")
    fail(number((s.get("cuda") or {}).get("driver_api")), "cuda.driver_api is cuDriverGetVersion's")
    fail(number(s.get("device_memory")) and s["device_memory"] > 0, "device_memory > 0")
    lib = s.get("libcuda") or ""
    if mode == "sim":
        fail("tests/simcuda" in lib, "libcuda is the simulated driver (%s)" % lib)
    else:
        fail(lib and "simcuda" not in lib, "libcuda is the real driver (%s)" % lib)
        fail(s.get("torch"), "torch version is stated")
        fail((s.get("cuda") or {}).get("nvcc"), "nvcc version is stated")
    ov = s.get("oversub") or {}
    fail(ov.get("with_vx") == "pass", "oversub.with_vx is pass (%r)" % ov.get("with_vx"))
    for lookup, ev in sorted((ov.get("vx_report") or {}).items()):
        fail(ev and ev.get("spilled") is True, "vx placed data past the limit (%s)" % lookup)
    fail(len(ov.get("vx_report") or {}) == 3, "vx reports for the three lookup styles")
    fail(ov.get("with_vx_nvme") == "pass", "oversub.with_vx_nvme is pass")
    fail(ov.get("without_vx_same_size") == "pass", "oversub.without_vx_same_size is pass")
    fail(ov.get("oom_without_vx") is True, "oversub.oom_without_vx is true")
    fail((s.get("steps") or {}).get("oversub_oom", {}).get("rc") == 2,
         "step oversub_oom exited 2 (CUDA error)")
    fail(ov.get("bytes") == 4 * s.get("limit", -1), "oversub.bytes is 4x the limit")
    # The driver's answers: every key present; the ones any CUDA 12+ driver
    # can answer are filled (the CUkernel and batch ones may be null on an
    # older driver, with the reason in log.txt).
    for k in ("cukernel_param_info", "cukernel_func_name", "batch_null_stream",
              "free_after_ctx_bytes", "free_after_cublas_bytes", "graph_node_kind",
              "procaddr_equal_after_init", "prefetch_gbps", "fault_gbps"):
        fail(k in s, "summary has %s" % k)
    fail(number(s.get("free_after_ctx_bytes")) and 0 < s["free_after_ctx_bytes"] <=
         (s.get("device_memory") or 0), "free_after_ctx_bytes within the device's memory")
    fail(isinstance(s.get("procaddr_equal_after_init"), bool), "procaddr_equal_after_init is a bool")
    fail(number(s.get("prefetch_gbps")) and s["prefetch_gbps"] > 0, "prefetch_gbps > 0")
    fail(number(s.get("fault_gbps")) and s["fault_gbps"] > 0, "fault_gbps > 0")
    if mode == "gpu":
        fail(isinstance(s.get("residency_within_limit"), bool),
             "residency_within_limit measured (%r)" % s.get("residency_within_limit"))
    hooks = s.get("hooks") or {}
    fail(number(hooks.get("launch_ns_added")), "hooks.launch_ns_added is a number")
    fail(number(hooks.get("alloc_free_ns_added")), "hooks.alloc_free_ns_added is a number")
    for step in COMMON_STEPS:
        fail((s.get("steps") or {}).get(step, {}).get("rc") == 0, "step %s exited 0" % step)


def check_torch(s, fail):
    for base, rate, match in (("train", "its", "loss_match"),
                              ("infer", "tokens_per_s", "tokens_match")):
        sec = s.get(base) or {}
        fail(number(sec.get("ideal_" + rate)), "%s.ideal_%s is a number" % (base, rate))
        for pol in POLICIES:
            fail(number(sec.get("%s_%s" % (pol, rate))), "%s.%s_%s is a number" % (base, pol, rate))
        fail(sec.get(match) in ("exact", "1e-5"), "%s.%s is exact or 1e-5" % (base, match))
        fail(number(sec.get("footprint_x_limit")) and sec["footprint_x_limit"] > 1,
             "%s footprint is past the limit" % base)
    fail((s.get("train") or {}).get("oom_without_vx") is True, "train.oom_without_vx is true")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("outdir")
    p.add_argument("--mode", choices=("sim", "gpu"), required=True)
    p.add_argument("--rc", type=int, help="gpu-check.sh's exit status, expected 0")
    args = p.parse_args(argv)
    failed = []

    def fail(cond, what):
        if not cond:
            failed.append(what)

    path = os.path.join(args.outdir, "summary.json")
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        s = None
        failed.append("summary.json is readable JSON (%s)" % e)
    if s is not None:
        if args.rc is not None:
            fail(args.rc == 0, "gpu-check.sh exited 0 (it exited %d)" % args.rc)
        check_common(s, args.mode, fail)
        if args.mode == "gpu":
            check_torch(s, fail)
        fail(s.get("wrong") == [], "no wrong results: %s" % s.get("wrong"))
        fail(s.get("incomplete") == [], "nothing left unshown: %s" % s.get("incomplete"))
        fail(s.get("ok") is True, "ok is true")
    names = os.listdir(args.outdir)
    fail(len([n for n in names if n not in ("stdout.txt",)]) <= 8,
         "at most 8 files in OUTDIR (the device tool brings back 8): %s" % names)
    if not failed:
        print("check_summary: ok (%s)" % path)
        return 0
    for what in failed:
        print("check_summary: FAILED:", what)
    log = os.path.join(args.outdir, "log.txt")
    if os.path.exists(log):
        with open(log, errors="replace") as f:
            text = f.read()
        print("---- end of log.txt ----")
        print(text[-12000:])
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
