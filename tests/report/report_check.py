#!/usr/bin/env python3
"""report_check.py MODE APP VX: runs prog_report under libvx.so (R_PRELOAD)
and checks its exit report (timeline, sites, command) and `vx report --svg`.

Modes: sites (VX_SITES=1, JSON + SVG), nosites (no VX_SITES: no sites),
text (the text report's sites section), fork (a forked child without a CUDA
call writes none; one with a call writes its own
report: inherited samples and sites, no sampler thread; the parent's goes on),
static (prog_report_static: a static function, named from the program's own
symbol table in the JSON and text reports, vx report's summary, SVG and folded
stacks), nvme (an NVMe run: every timeline sample a partition, native + managed + host +
nvme == live, bytes in the swap counted there only)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.dom.minidom

MB = 1 << 20
ALPHA, BETA = "report_site_alpha", "report_site_beta"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run_app(app, cwd, extra, args=()):
    env = dict(os.environ)
    env["LD_PRELOAD"] = os.environ["R_PRELOAD"]
    env.update(extra)
    p = subprocess.run([app] + list(args), cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=50)
    sys.stderr.write(p.stderr)
    check(p.returncode == 0, "prog_report exited %d" % p.returncode)
    check("ok" in p.stdout, "prog_report did not finish: %r" % p.stdout)


def load(path):
    with open(path) as f:
        try:
            return json.load(f)
        except ValueError as e:
            fail("%s is not JSON: %s" % (path, e))


def check_timeline(j, min_t, min_samples=3):
    tl = j.get("timeline")
    check(isinstance(tl, list) and len(tl) >= min_samples,
          "timeline has < %d samples: %r" % (min_samples, tl))
    keys = {"t", "native", "managed", "host", "nvme", "live", "bytes_up", "bytes_down"}
    for s in tl:  # a partition of what the program has allocated through vx
        check(s["native"] + s["managed"] + s["host"] + s["nvme"] == s["live"], "not a partition: %r" % s)
    for a, b in zip(tl, tl[1:]):
        check(set(a) == keys, "sample keys %r" % sorted(a))
        check(b["t"] >= a["t"], "t goes back: %r then %r" % (a, b))
        check(b["bytes_up"] >= a["bytes_up"], "bytes_up decreases: %r then %r" % (a, b))
        check(b["bytes_down"] >= a["bytes_down"], "bytes_down decreases")
    check(tl[-1]["t"] >= min_t, "last sample at %.3f s, expected >= %.3f" % (tl[-1]["t"], min_t))
    return tl


def site_of(j, name):
    found = [s for s in j.get("sites", []) if any(name in f for f in s["stack"])]
    check(len(found) == 1, "%d sites name %s: %r" % (len(found), name, j.get("sites")))
    s = found[0]
    check(s["stack"][0].startswith("prog_report(%s+0x" % name),
          "innermost frame of %s is %r (vx's frames must be skipped)" % (name, s["stack"][0]))
    return s


def expect_site(s, count, total, live):
    got = (s["count"], s["bytes"], s["bytes_spilled"], s["live_bytes"])
    check(got == (count, total, total, live),
          "site %r: count/bytes/spilled/live %r, expected %r" % (s["stack"][0], got,
                                                                 (count, total, total, live)))


def check_svg(vx, report, tmp, nsamples):
    svg = os.path.join(tmp, "out.svg")
    p = subprocess.run([vx, "report", report, "--svg", svg], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0, "vx report --svg exited %d: %s" % (p.returncode, p.stderr))
    dom = xml.dom.minidom.parse(svg)
    texts = " ".join(n.data for n in dom.getElementsByTagName("*") for n in n.childNodes
                     if n.nodeType == n.TEXT_NODE)
    check(ALPHA in texts and BETA in texts, "the SVG does not name both sites")
    ids = {e.getAttribute("id"): e for e in dom.getElementsByTagName("path")
           + dom.getElementsByTagName("polyline")}
    for tier in ("native", "managed", "host", "nvme"):
        check("tier-" + tier in ids, "no tier-%s series in the SVG" % tier)
    pts = ids.get("traffic-up")
    check(pts is not None and len(pts.getAttribute("points").split()) == nsamples,
          "traffic-up does not have one point per sample")
    d = ids["tier-managed"].getAttribute("d")
    check(d.count("L") + d.count("M") >= nsamples, "tier-managed has too few points")


def mode_sites(app, vx, tmp):
    run_app(app, tmp, {"VX_SITES": "1", "VX_REPORT": "out.json"})
    j = load(os.path.join(tmp, "out.json"))
    check(os.path.basename(app) in j.get("command", ""), "command %r" % j.get("command"))
    tl = check_timeline(j, 0.9)
    check(max(s["managed"] for s in tl) >= 28 * MB, "managed bytes never reached 28 MiB")
    check(tl[-1]["managed"] == 12 * MB, "final managed %d, expected 12 MiB" % tl[-1]["managed"])
    check(tl[-1]["native"] >= 8 * MB, "final native %d" % tl[-1]["native"])
    alpha, beta = site_of(j, ALPHA), site_of(j, BETA)
    expect_site(alpha, 3, 12 * MB, 12 * MB)
    expect_site(beta, 2, 16 * MB, 0)
    spilled = [s["bytes_spilled"] for s in j["sites"]]
    check(spilled == sorted(spilled, reverse=True), "sites not sorted by bytes spilled")
    check_svg(vx, os.path.join(tmp, "out.json"), tmp, len(tl))


def mode_nosites(app, vx, tmp):
    run_app(app, tmp, {"VX_SITES": "0", "VX_REPORT": "out.json", "REPORT_APP_MS": "300"})
    j = load(os.path.join(tmp, "out.json"))
    check(not j.get("sites"), "sites recorded without VX_SITES: %r" % j.get("sites"))
    check_timeline(j, 0.25)


def mode_nvme(app, vx, tmp):
    # An NVMe run (#14): every sample is a partition, data reaches the swap
    # and counts there, not also under managed or host.
    swap = os.path.join(tmp, "swap")
    os.mkdir(swap)
    run_app(app, tmp, {"VX_REPORT": "out.json", "VX_NVME_DIR": swap, "VX_HOST_LIMIT": "4M"})
    j = load(os.path.join(tmp, "out.json"))
    tl = check_timeline(j, 0.9)
    check(j["devices"][0]["nvme_write_bytes"] > 0, "nothing was spilled: the test tests nothing")
    # the driver's own migrations, which the simulator reports (a real driver: "not measured")
    dev = j["devices"][0]
    check(isinstance(dev.get("demand_bytes_up"), int) and isinstance(dev.get("demand_bytes_down"), int)
          and "demand_migrations" not in dev, "demand migrations: %r" % dev)
    peak = max(tl, key=lambda s: s["nvme"])
    check(peak["nvme"] > 0, "no sample shows bytes in the swap: %r" % tl)
    check(peak["managed"] + peak["host"] + peak["nvme"] <= peak["live"] - peak["native"],
          "movable bytes counted twice: %r" % peak)
    r = subprocess.run([vx, "report", os.path.join(tmp, "out.json"), "--svg", os.path.join(tmp, "r.svg")],
                       capture_output=True, text=True)
    check(r.returncode == 0, "vx report --svg: %s" % r.stderr)


def mode_text(app, vx, tmp):
    run_app(app, tmp, {"VX_SITES": "1", "VX_REPORT": "out.txt", "REPORT_APP_MS": "300"})
    with open(os.path.join(tmp, "out.txt")) as f:
        text = f.read()
    check(re.search(r"^  demand migrations \(the driver's own\): \S+ \S+ up, \S+ \S+ down$", text, re.M),
          "no demand-migration line in the text report:\n" + text)
    check(re.search(r"^memory now: \S+ \S+ live = \S+ \S+ native \+ \S+ \S+ managed \+ \S+ \S+ host \+ "
                    r"\S+ \S+ nvme$", text, re.M), "no partition line in the text report:\n" + text)
    part = text.partition("top allocation sites")[2]
    check(part, "no sites section in the text report:\n" + text)
    check(ALPHA in part and BETA in part, "text sites section misses a site:\n" + part)
    check(part.index(BETA) < part.index(ALPHA), "beta (16 MiB spilled) is not listed first")


def mode_fork(app, vx, tmp):
    os.mkdir(os.path.join(tmp, "child"))
    # A child that makes no CUDA call writes no report (it would replace the
    # parent's with a stale copy where both name the same path).
    run_app(app, tmp, {"VX_SITES": "1", "VX_REPORT": "out.json", "REPORT_APP_MS": "300"},
            ["fork"])
    check(not os.path.exists(os.path.join(tmp, "child", "out.json")),
          "a child without a CUDA call wrote a report")
    check_timeline(load(os.path.join(tmp, "out.json")), 0.45)
    os.unlink(os.path.join(tmp, "out.json"))
    # One that makes a call writes its own.
    run_app(app, tmp, {"VX_SITES": "1", "VX_REPORT": "out.json", "REPORT_APP_MS": "300",
                       "REPORT_APP_CHILD_CUDA": "1"}, ["fork"])
    parent = load(os.path.join(tmp, "out.json"))
    child = load(os.path.join(tmp, "child", "out.json"))
    check(parent["pid"] != child["pid"], "one report for two processes")
    ptl = check_timeline(parent, 0.45)  # child 0.2 s, then the parent's 0.3 s
    ctl = check_timeline(child, 0.18, 2)
    # The child has no sampler: after the fork only its final sample, while
    # the parent's sampler kept going (several samples after the child's end).
    forked = ctl[-2]["t"]
    check(ctl[-1]["t"] - forked >= 0.18, "child samples after the fork: %r" % ctl)
    later = [s for s in ptl if s["t"] > ctl[-1]["t"]]
    check(len(later) >= 2, "parent sampler stopped after the fork: %r" % ptl)
    expect_site(site_of(child, ALPHA), 3, 12 * MB, 12 * MB)  # inherited
    expect_site(site_of(parent, ALPHA), 3, 12 * MB, 12 * MB)
    expect_site(site_of(parent, BETA), 2, 16 * MB, 0)
    expect_site(site_of(child, BETA), 2, 16 * MB, 16 * MB)  # the child freed nothing


def mode_static(app, vx, tmp):
    # #14: a function that is not exported (dladdr cannot name it) is named
    # from the program's symbol table, as a PIE and at a fixed address alike.
    fn, mod = "report_static_site", os.path.basename(app)
    run_app(app, tmp, {"VX_SITES": "1", "VX_REPORT": "out.json"})
    j = load(os.path.join(tmp, "out.json"))
    sites = [s for s in j.get("sites", []) if s["stack"][0].startswith("%s(%s+0x" % (mod, fn))]
    check(len(sites) == 1, "no site names %s(%s+0x...) first: %r" % (mod, fn, j.get("sites")))
    check(sites[0]["count"] == 2 and sites[0]["bytes_spilled"] == 8 * MB, "site %r" % sites[0])
    check(any(f.startswith("%s(main+0x" % mod) for f in sites[0]["stack"]),
          "its caller is not named main: %r" % sites[0]["stack"])
    r = subprocess.run([vx, "report", os.path.join(tmp, "out.json")], capture_output=True, text=True,
                       timeout=30)
    check(r.returncode == 0 and "%s(%s+0x" % (mod, fn) in r.stdout, "vx report: %r" % r.stdout)
    folded = os.path.join(tmp, "out.folded")
    r = subprocess.run([vx, "report", os.path.join(tmp, "out.json"), "--folded", folded,
                        "--svg", os.path.join(tmp, "out.svg")], capture_output=True, text=True,
                       timeout=30)
    check(r.returncode == 0, "vx report --folded --svg: %s" % r.stderr)
    with open(folded) as f:
        lines = f.read().splitlines()
    check(any(re.search(r";%s\(%s\+0x[0-9a-f]+\) %d$" % (re.escape(mod), fn, 8 * MB), l)
              for l in lines), "folded stacks: %r" % lines)
    dom = xml.dom.minidom.parse(os.path.join(tmp, "out.svg"))
    texts = " ".join(n.data for n in dom.getElementsByTagName("*") for n in n.childNodes
                     if n.nodeType == n.TEXT_NODE)
    check("%s(%s+0x" % (mod, fn) in texts, "the SVG does not name %s" % fn)
    run_app(app, tmp, {"VX_SITES": "1", "VX_REPORT": "out.txt"})
    with open(os.path.join(tmp, "out.txt")) as f:
        part = f.read().partition("top allocation sites")[2]
    check(re.search(r"^      %s\(%s\+0x[0-9a-f]+\)$" % (re.escape(mod), fn), part, re.M),
          "the text report does not name %s:\n%s" % (fn, part))


def main():
    mode, app, vx = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    with tempfile.TemporaryDirectory(prefix="vx-report-") as tmp:
        {"sites": mode_sites, "nosites": mode_nosites, "text": mode_text,
         "fork": mode_fork, "nvme": mode_nvme, "static": mode_static}[mode](app, vx, tmp)
    print("report_%s: ok" % mode)


if __name__ == "__main__":
    main()
