"""summarize: turns the work directory of scripts/gpu-check.sh into
summary.json (every figure and verdict) and losses.json; exit 0 when ok.

Verdicts fall in two lists: `wrong` (a result that is incorrect: data or loss
mismatch, a vx leg that crashed) and `incomplete` (something that could not
be shown: a step that failed to build, timed out or was skipped).  ok is true
only when both are empty.  Speed never decides ok.
"""
import argparse
import json
import os
import re
import sys

POLICIES = ("demand", "static", "predict")


class Check:
    def __init__(self, work, mode):
        self.work, self.mode = work, mode
        self.wrong, self.incomplete = [], []
        self.steps = {}
        path = os.path.join(work, "steps.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    if line.strip():
                        rec = json.loads(line)
                        self.steps[rec["step"]] = rec

    def text(self, name):
        """A work file's text, or '' when it does not exist."""
        try:
            with open(os.path.join(self.work, name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def json(self, name):
        try:
            with open(os.path.join(self.work, name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def output(self, step):
        return self.text(step + ".out") + self.text(step + ".err")

    def rc(self, step):
        rec = self.steps.get(step)
        return None if rec is None or rec.get("skipped") else rec["rc"]

    def failure(self, step):
        """Why a step did not run to completion, or None if it exited 0."""
        rec = self.steps.get(step)
        if rec is None:
            return "not run"
        if rec.get("skipped"):
            return "skipped (time budget spent)"
        rc = rec["rc"]
        if rc == 0:
            return None
        if rc in (124, 137):
            return "timeout"
        if rc == 127:
            return "program not found"
        if rc > 128:
            return "killed by signal %d" % (rc - 128)
        return "exit %d" % rc

    def crashed(self, step):
        """True when a step ran and failed in a way that is not a timeout,
        a skip, or a missing program: for a vx leg that is a wrong result."""
        if step != "probe" and self.failure("probe"):
            return False  # no usable driver at all: nothing after it can be judged
        why = self.failure(step)
        return why is not None and why not in ("not run", "timeout", "program not found") \
            and not why.startswith("skipped")


def first_line(text, pattern):
    for line in text.splitlines():
        if re.search(pattern, line):
            return line.strip()[:200]
    return None


def parse_object(text):
    """The last JSON object printed in text (a line starting with '{')."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            return json.loads(text[start:end + 1])
        except ValueError:
            pass
    return None


# ---- what vx says it did (VX_REPORT=<work>/vxreport-LEG.json) ----
REPORT_FIELDS = ("limit_bytes", "native_bytes_peak", "managed_bytes_peak", "host_tier_bytes_peak",
                 "nvme_bytes_peak", "alloc_native", "alloc_managed", "alloc_host_static",
                 "managed_fallbacks", "bytes_up", "bytes_down", "prefetch_hits",
                 "prefetch_misses", "launches", "underflows")


def vx_evidence(c, leg, what):
    """The figures of vx's exit report for a leg that passed; a missing report
    or nothing placed past the limit means the leg did not exercise vx."""
    rep = c.json("vxreport-%s.json" % leg)
    devs = rep.get("devices") if isinstance(rep, dict) else None
    if not devs:
        c.incomplete.append("%s: vx wrote no exit report (was libvx.so loaded?)" % what)
        return None
    dev = devs[0]
    ev = {k: dev[k] for k in REPORT_FIELDS if k in dev}
    spilled = sum(dev.get(k, 0) for k in ("alloc_managed", "alloc_host_static",
                                          "managed_fallbacks"))
    ev["spilled"] = spilled > 0
    if not ev["spilled"]:
        c.incomplete.append("%s: vx placed nothing past the limit" % what)
    if dev.get("underflows", 0):
        c.wrong.append("%s: vx's memory counters underflowed %d times" % (what, dev["underflows"]))
    return ev


# ---- machine facts ----
def machine(c, summary, limit):
    probe = c.json("probe.json") or parse_object(c.text("probe.out"))
    dev = (probe or {}).get("devices", [{}])
    dev = dev[0] if dev else {}
    summary["kernel"] = c.text("uname.txt").strip() or None
    summary["libcuda"] = (probe or {}).get("libcuda")
    summary["device_memory"] = dev.get("total_mem")
    drv = (probe or {}).get("driver_version")
    cuda = {"driver_api": drv}
    if drv:
        cuda["driver_api_version"] = "%d.%d" % (drv // 1000, drv % 1000 // 10)
    nvcc = re.search(r"release ([0-9.]+)", c.text("nvcc.txt"))
    cuda["nvcc"] = nvcc.group(1) if nvcc else None
    summary["cuda"] = cuda
    if c.mode == "sim":
        summary.update(gpu=dev.get("name"), driver="simcuda", torch=None)
    else:
        lines = c.text("smi.txt").splitlines()  # "name, driver_version, memory.total"
        smi = [field.strip() for field in lines[0].split(",")] if lines else []
        summary["gpu"] = smi[0] if smi else dev.get("name")
        summary["driver"] = smi[1] if len(smi) > 1 else None
        torch_lines = c.text("torch.txt").split()
        summary["torch"] = torch_lines[0] if torch_lines else None
        summary["torch_cuda"] = torch_lines[1] if len(torch_lines) > 1 else None
    if c.failure("probe"):
        c.incomplete.append("gpu_probe: " + c.failure("probe"))
    lib = summary["libcuda"] or ""
    if c.mode == "gpu" and "simcuda" in lib:
        c.wrong.append("the programs load the simulated driver (%s), not the real one" % lib)
    if c.mode == "sim" and lib and "simcuda" not in lib:
        c.incomplete.append("--sim but the driver loaded is %s" % lib)
    for line in c.text("ldd.txt").splitlines():
        if c.mode == "gpu" and "libcuda" in line and "simcuda" in line:
            c.wrong.append("a program links the simulated driver: " + line.strip())
    vx_probe = parse_object(c.text("probe_vx.out"))
    if vx_probe:
        total = vx_probe.get("devices", [{}])[0].get("total_mem")
        summary["vx_reported_total"] = total
        if total != limit:  # VX_REPORT_MEMORY's default, "limit"
            c.wrong.append("under vx cuDeviceTotalMem_v2 reported %s bytes, not the limit %d"
                           % (total, limit))
    elif c.crashed("probe_vx") and not c.failure("probe"):
        c.wrong.append("gpu_probe under vx failed: " + c.failure("probe_vx"))


# ---- driver-API programs ----
def oversub_verdict(c, step):
    why = c.failure(step)
    if why is None:
        return "pass"
    rc = c.rc(step)
    if rc == 1:
        return "DATA MISMATCH"
    if rc == 2:
        return "CUDA error: %s" % (first_line(c.output(step), r"CUDA_ERROR|error") or "?")
    return why


OVERSUB_LOOKUPS = ("linked", "dlsym", "procaddr")


def oversub(c, limit):
    res = {"bytes": 4 * limit}
    by_lookup, reports = {}, {}
    for lookup in OVERSUB_LOOKUPS:
        step = "oversub_vx_" + lookup
        by_lookup[lookup] = verdict = oversub_verdict(c, step)
        if verdict == "pass":
            reports[lookup] = vx_evidence(c, step, "vx_oversub with vx (%s)" % lookup)
        else:
            (c.wrong if c.crashed(step) else c.incomplete).append(
                "vx_oversub with vx at 4x the limit (%s): %s" % (lookup, verdict))
    bad = ["%s: %s" % (k, v) for k, v in by_lookup.items() if v != "pass"]
    res["with_vx"] = "pass" if not bad else "; ".join(bad)
    res["with_vx_by_lookup"] = by_lookup
    res["with_vx_nvme"] = oversub_verdict(c, "oversub_vx_nvme")
    if res["with_vx_nvme"] == "pass":
        ev = vx_evidence(c, "oversub_vx_nvme", "vx_oversub with vx and the NVMe tier")
        res["nvme"] = {"used": bool(ev and ev.get("nvme_bytes_peak")),
                       "nvme_bytes_peak": (ev or {}).get("nvme_bytes_peak")}
    else:
        (c.wrong if c.crashed("oversub_vx_nvme") else c.incomplete).append(
            "vx_oversub with vx and the NVMe tier: " + res["with_vx_nvme"])
    res["without_vx_same_size"] = oversub_verdict(c, "oversub_native")
    out = c.output("oversub_oom")
    res["oom_without_vx"] = c.rc("oversub_oom") == 2 and \
        re.search(r"OUT_OF_MEMORY|out of memory", out, re.I) is not None
    res["oom_leg"] = first_line(out, r"OUT_OF_MEMORY|out of memory") or c.failure("oversub_oom")
    res["seconds"] = {s: c.steps[s]["secs"] for s in c.steps if s.startswith("oversub_")}
    res["vx_report"] = reports
    if res["without_vx_same_size"] != "pass":
        (c.wrong if c.rc("oversub_native") == 1 else c.incomplete).append(
            "vx_oversub without vx at the same size: " + res["without_vx_same_size"])
    if not res["oom_without_vx"]:
        c.incomplete.append("vx_oversub past the device's memory without vx did not show "
                            "CUDA_ERROR_OUT_OF_MEMORY (%s)" % (c.failure("oversub_oom") or "exit 0"))
    return res


def hooks(c):
    res = parse_object(c.text("hooks.out"))
    if c.failure("hooks") is None and isinstance(res, dict) and isinstance(res.get("launch_ns_added"), (int, float)):
        return res
    why = c.failure("hooks") or "no launch_ns_added in its output"
    (c.wrong if c.crashed("hooks") else c.incomplete).append("vx bench hooks: " + why)
    return {"error": why}


# ---- PyTorch ----
def leg_result(c, base, leg):
    return c.json("%s-%s.json" % (base, leg))


def oom_leg(c, base):
    step = base + "-oom"
    res = leg_result(c, base, "oom") or {}
    shown = c.rc(step) == 3 and res.get("status") == "oom"
    if not shown:
        why = "it completed" if c.rc(step) == 0 else c.failure(step)
        c.incomplete.append("%s without vx, capped at the limit, did not raise "
                            "torch.cuda.OutOfMemoryError (%s)" % (base, why))
    return shown, res.get("error")


def compare_losses(ref, got):
    if ref.get("config") != got.get("config") or len(ref["losses"]) != len(got["losses"]):
        return "MISMATCH"
    if ref["losses_hex"] == got["losses_hex"]:
        return "exact"
    worst = max(abs(a - b) for a, b in zip(ref["losses"], got["losses"]))
    return "1e-5" if worst <= 1e-5 else "MISMATCH"


def compare_tokens(ref, got):
    if ref.get("config") != got.get("config"):
        return "MISMATCH (different config)"
    if ref["tokens"] == got["tokens"]:
        return "exact"
    for b, (r, g) in enumerate(zip(ref["tokens"], got["tokens"])):
        for s, (x, y) in enumerate(zip(r, g)):
            if x != y:
                return "MISMATCH (sequence %d, step %d)" % (b, s)
    return "MISMATCH (lengths)"


def worst(verdicts):
    vals = [v for v in verdicts if v]
    if not vals:
        return None
    if any(v.startswith("MISMATCH") for v in vals):
        return "MISMATCH"
    return "exact" if all(v == "exact" for v in vals) else "1e-5"


def torch_section(c, base, limit, rate, compare, losses_out):
    """Figures and verdicts of train_gpt.py (base 'train') or infer_kv.py ('infer')."""
    res = {}
    ref = leg_result(c, base, "ref")
    if not ref or ref.get("status") != "ok":
        c.incomplete.append("%s reference (no vx, no limit): %s" % (
            base, c.failure(base + "-ref") or (ref or {}).get("status", "no result")))
        ref = None
    else:
        res["config"] = ref["config"]
        res["ideal_" + rate] = ref[rate]
        foot = ref.get("max_memory_allocated") or 0
        res["footprint_bytes"] = foot
        res["footprint_x_limit"] = round(foot / limit, 2) if limit else None
        if foot <= limit:
            c.incomplete.append("%s footprint %d bytes is not past the limit %d" % (base, foot, limit))
        losses_out["ref"] = payload(ref, base)
    if base + "-oom" in c.steps:
        res["oom_without_vx"], res["oom_error"] = oom_leg(c, base)
    matches = {}
    for pol in POLICIES:
        step = "%s-%s" % (base, pol)
        got = leg_result(c, base, pol)
        if got and got.get("status") == "ok" and c.rc(step) == 0:
            res["%s_%s" % (pol, rate)] = got[rate]
            if ref:
                matches[pol] = compare(ref, got)
                if matches[pol].startswith("MISMATCH"):
                    c.wrong.append("%s under vx (VX_POLICY=%s): results differ from the "
                                   "reference: %s" % (base, pol, matches[pol]))
            losses_out[pol] = payload(got, base)
            res.setdefault("vx_report", {})[pol] = vx_evidence(
                c, step, "%s under vx (VX_POLICY=%s)" % (base, pol))
        else:
            why = c.failure(step) or "status %s" % (got or {}).get("status")
            res["%s_%s" % (pol, rate)] = None
            (c.wrong if c.crashed(step) else c.incomplete).append(
                "%s under vx (VX_POLICY=%s): %s" % (base, pol, why))
    key = "loss_match" if base == "train" else "tokens_match"
    res[key] = worst(matches.values())
    res[key + "_by_policy"] = matches
    return res


def payload(result, base):
    if base == "train":
        return {"losses": result["losses"], "losses_hex": result["losses_hex"]}
    return {"sha256": result.get("tokens_sha256"), "first_sequence": result["tokens"][0]}


# ---- the driver's answers (gpu_facts) ----
FACT_KEYS = ("cukernel_param_info", "cukernel_func_name", "batch_null_stream",
             "free_after_ctx_bytes", "free_after_cublas_bytes", "graph_node_kind",
             "procaddr_equal_after_init", "prefetch_gbps", "fault_gbps", "managed_gbps")


def facts(c, s):
    """Copies gpu_facts' answers into the summary, each key present (null
    when the driver could not answer, with gpu_facts' reason in the log)."""
    got = c.json("facts.json")
    if got is None:
        c.incomplete.append("facts: %s" % (c.failure("facts") or "no JSON from gpu_facts"))
        got = {}
    for k in FACT_KEYS:
        s[k] = got.get(k)
    # capture_probe's verdict: cells where the driver is stricter than the
    # simulator's capture table (a simulator defect, listed, not a vx result).
    m = re.search(r"capture_probe: (\d+) cells where the driver is stricter.*?(\d+) where it is "
                  r"more lenient", c.output("capture_table"))
    s["capture_stricter_cells"] = int(m.group(1)) if m else None
    s["capture_lenient_cells"] = int(m.group(2)) if m else None
    if not m:
        c.incomplete.append("capture_table: %s" % (c.failure("capture_table") or "no verdict"))
    elif int(m.group(1)):
        s.setdefault("simulator_defects", []).append(
            "capture table: the driver is stricter than the simulator in %s cells "
            "(capture_table.out in log.txt)" % m.group(1))


def mib_samples(text):
    return [int(v) << 20 for v in re.findall(r"^\s*(\d+)\s*$", text, re.M)]


def residency(c, s, limit):
    """residency_within_limit: the device's used memory while the predict
    training leg ran, above what was used before it, against the limit plus
    what the driver and cuBLAS take outside any allocation of the program."""
    base, peak = mib_samples(c.text("residency-base.txt")), mib_samples(c.text("residency.txt"))
    if not base or not peak:
        s["residency_within_limit"] = None
        c.incomplete.append("residency: no NVML samples during the predict training leg")
        return
    after = s.get("free_after_cublas_bytes") or s.get("free_after_ctx_bytes")
    outside = (s.get("device_memory") or 0) - after if after else 0
    used = max(peak) - base[0]
    bound = limit + max(outside, 0)
    s["residency_peak_bytes"] = used
    s["residency_bound_bytes"] = bound
    s["residency_within_limit"] = used <= bound


# ---- the whole summary ----
def build(c, args):
    s = {"ran": True, "mode": args.mode, "limit": args.limit, "quick": bool(args.quick)}
    machine(c, s, args.limit)
    for step in ("debs", "configure"):
        if c.failure(step) not in (None, "not run"):
            c.incomplete.append("%s: %s" % (step, c.failure(step)))
    missing = c.text("missing.txt").split()
    if missing:
        c.incomplete.append("not built: " + " ".join(missing))
    elif c.failure("build") not in (None, "not run"):
        s.setdefault("build_warnings", []).append(
            "building the check's targets failed (%s), building everything left them "
            "in place (%s)" % (c.failure("build"), c.failure("build_all") or "ok"))
    facts(c, s)
    s["oversub"] = oversub(c, args.limit)
    s["hooks"] = hooks(c)
    losses = {}
    if args.mode == "gpu":
        if not s.get("torch"):
            c.incomplete.append("python3 cannot import torch: no PyTorch figures")
        else:
            losses["train"], losses["infer"] = {}, {}
            s["train"] = torch_section(c, "train", args.limit, "its", compare_losses,
                                       losses["train"])
            s["infer"] = torch_section(c, "infer", args.limit, "tokens_per_s",
                                       compare_tokens, losses["infer"])
            residency(c, s, args.limit)
        s["notes"] = [
            "VX_DEVICE_LIMIT is a budget that vx enforces; the card itself has %s bytes, so "
            "the driver never feels memory pressure: under the demand and static "
            "policies vx keeps demand paging inside the limit itself (it evicts least "
            "recently used data for each launch, prefetches nothing)." % s.get("device_memory"),
        ]
    s["warnings"] = c.text("warnings.txt").splitlines()
    s["steps"] = {k: {"rc": v["rc"], "secs": v["secs"]} for k, v in c.steps.items()}
    s["elapsed_s"] = args.elapsed
    s["wrong"], s["incomplete"] = c.wrong, c.incomplete
    s["ok"] = not c.wrong and not c.incomplete
    return s, losses


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--limit", type=int, required=True)
    p.add_argument("--mode", choices=("gpu", "sim"), required=True)
    p.add_argument("--quick", type=int, default=0)
    p.add_argument("--elapsed", type=int, default=0)
    args = p.parse_args(argv)
    c = Check(args.work, args.mode)
    summary, losses = build(c, args)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    if losses:
        with open(os.path.join(args.out, "losses.json"), "w") as f:
            json.dump(losses, f)
    for line in c.wrong:
        print("gpu-check: WRONG:", line, file=sys.stderr)
    for line in c.incomplete:
        print("gpu-check: not shown:", line, file=sys.stderr)
    print("gpu-check: ok" if summary["ok"] else "gpu-check: NOT ok", file=sys.stderr)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
