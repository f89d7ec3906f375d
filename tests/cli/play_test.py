#!/usr/bin/env python3
"""play_test.py VX CASE: `vx play` plays a synthetic trace live over the
simulated driver with libvx.so (CASE json), refuses bad input in one line
with exit 2 (CASE errors), and in timing-only mode plays a trace whose
footprint is far above the host memory it is given (CASE big), plays
a trace's COPY records as the replay charges them (CASE copies), and
passes pointers from which libvx infers the trace's own ranges, also where
two ranges share a chunk, as a caching allocator's tensors do (CASE
shared)."""
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile

VX = sys.argv[1]
KEYS = ["policy", "total_s", "stall_s", "bytes_up", "bytes_down", "faults", "capacity"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def base_env():
    e = dict(os.environ)
    san = os.environ.get("VX_TEST_SAN_RUNTIME")
    if san:  # the player's child preloads libvx.so: the runtime must come first
        e["LD_PRELOAD"] = san
        e["ASAN_OPTIONS"] = "verify_asan_link_order=0:" + e.get("ASAN_OPTIONS", "")
    return e


def run(args, env=None, limit=None):
    def pre():
        if limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    e = base_env()
    e.update(env or {})
    return subprocess.run([VX] + args, capture_output=True, text=True, env=e,
                          preexec_fn=pre, timeout=600)


def synth(tmp, spec):
    path = os.path.join(tmp, "t.vxt")
    p = run(["replay", "--synth", spec, "--save", path, "--policy", "demand", "--json"])
    if p.returncode != 0:
        fail("vx replay --save: " + p.stderr)
    return path, json.loads(p.stdout.splitlines()[0])


def case_json(tmp):
    path, rep = synth(tmp, "transformer-train,layers=4,iters=3,oversub=2")
    p = run(["play", path, "--policy", "demand,predict", "--json"])
    if p.returncode != 0:
        fail("vx play exit %d: %s" % (p.returncode, p.stderr))
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    if [r["policy"] for r in rows] != ["demand", "predict"]:
        fail("one object per policy, in order: %s" % p.stdout)
    for r in rows:
        for k in KEYS:
            if k not in r:
                fail("key %s missing in %s" % (k, r))
        if r["capacity"] != rep["capacity"]:
            fail("capacity is the trace's by default: %s vs %s" % (r["capacity"], rep["capacity"]))
        if not (r["total_s"] > 0 and 0 <= r["stall_s"] <= r["total_s"] and r["bytes_up"] > 0):
            fail("insane figures: %s" % r)
    if rows[0]["faults"] <= 0:
        fail("demand faults when oversubscribed: %s" % rows[0])
    # --capacity sets the simulated device: at 4x the trace's, demand faults less
    p = run(["play", path, "--policy", "demand", "--json", "--capacity",
             str(rep["capacity"] * 4)])
    big = json.loads(p.stdout)
    if p.returncode != 0 or big["capacity"] != rep["capacity"] * 4 or \
            big["bytes_up"] >= rows[0]["bytes_up"]:
        fail("--capacity: %s %s" % (p.stdout, p.stderr))
    # the same compute time as offline, and with room for everything (nothing
    # moves) the same total virtual time as vx replay's "infinite", to the ns
    if abs(rows[0]["compute_s"] - rep["compute_s"]) > 2e-6:
        fail("compute_s: live %s, replay %s" % (rows[0]["compute_s"], rep["compute_s"]))
    p = run(["replay", path, "--policy", "infinite", "--json"])
    inf = json.loads(p.stdout)
    p = run(["play", path, "--policy", "demand", "--json", "--capacity", "1T"])
    roomy = json.loads(p.stdout)
    if p.returncode != 0 or roomy["faults"] != 0 or roomy["bytes_up"] != 0 or \
            abs(roomy["total_s"] - inf["total_s"]) > 2e-6:
        fail("nothing to move: live %s, replay infinite %s" % (roomy, inf))
    # the text table names every policy
    p = run(["play", path, "--policy", "static"])
    if p.returncode != 0 or "static" not in p.stdout or "total_s" not in p.stdout:
        fail("text table: %s %s" % (p.stdout, p.stderr))


def case_errors(tmp):
    path, _ = synth(tmp, "cnn,iters=1")
    bad = [
        ([path, "--policy", "oracle"], "offline"),
        ([path, "--policy", "demand,bogus"], "unknown policy"),
        ([os.path.join(tmp, "missing.vxt")], "No such file"),
        ([path, "--capacity", "lots"], "--capacity"),
        ([path, "--capacity", "1K"], "below one chunk"),
        ([path, "--policy"], "needs a value"),
        ([path, "--ahead", "-1"], "--ahead"),
        ([], "TRACE"),
    ]
    for args, what in bad:
        p = run(["play"] + args)
        lines = p.stderr.strip().splitlines()
        if p.returncode != 2 or len(lines) != 1 or what not in lines[0] or \
                not lines[0].startswith("vx play: ") or p.stdout:
            fail("vx play %s: exit %d, stderr %r" % (args, p.returncode, p.stderr))
    # a simulator that is not there is named
    p = run(["play", path, "--sim", tmp])
    if p.returncode != 1 or "libcuda.so.1" not in p.stderr or tmp not in p.stderr:
        fail("--sim without a simulator: %d %r" % (p.returncode, p.stderr))


def case_big(tmp):
    # about 13 GB of allocations over the run (capacity 6.5 GB) under a
    # 2 GiB data limit: only possible when no byte is backed
    path, rep = synth(tmp, "transformer-train,layers=24,iters=2,oversub=2")
    limit = 2 << 30
    if rep["capacity"] * 2 < 5 * limit:
        fail("the trace is not big enough: %s" % rep)
    p = run(["play", path, "--policy", "demand", "--json"], limit=limit)
    if p.returncode != 0:
        fail("timing-only play under a 2 GiB limit: %s" % p.stderr)
    r = json.loads(p.stdout)
    if r["bytes_up"] <= limit or r["faults"] <= 0:
        fail("it moved less than it should: %s" % r)
    # the control: keeping data, the same run does not fit
    p = run(["play", path, "--policy", "demand", "--json"], limit=limit,
            env={"SIMCUDA_TIMING_ONLY": "0"})
    if p.returncode == 0:
        fail("with data kept the run should not fit in 2 GiB")


def copies_trace(path):
    """A trace written by hand (policy/TRACE.md): one 8 MiB allocation, an
    async H2D copy of it, a launch reading it, a synchronous D2H copy, a
    launch on another stream, the free."""
    mib = 1 << 20
    b = b"VXTRACE\0" + struct.pack("<HHIQQQ", 1, 40, 1, 2 * mib, 0, 64 * mib)

    def rec(kind, payload):
        return struct.pack("<B3xI", kind, len(payload)) + payload

    def launch(stream):
        return rec(3, struct.pack("<QQQQII", 0, 0x11, stream, 1000000, 0, 1) +
                   struct.pack("<QIIII", 1, 0, 4, 1, 0))

    def copy(direction, flags):
        return rec(4, struct.pack("<QQQQQIIII", 0, 0, 1, 0, 8 * mib, 0, direction, flags, 0))

    b += rec(1, struct.pack("<QQQQII", 0, 1, 0, 8 * mib, 0, 0))
    b += copy(1, 0) + launch(0) + copy(2, 1) + launch(5)
    b += rec(2, struct.pack("<QQ", 0, 1))
    with open(path, "wb") as f:
        f.write(b)
    return 8 * mib


def case_copies(tmp):
    path = os.path.join(tmp, "c.vxt")
    n = copies_trace(path)
    p = run(["replay", path, "--policy", "infinite", "--json"])
    if p.returncode != 0:
        fail("vx replay of the copies: %s" % p.stderr)
    inf = json.loads(p.stdout)
    # two copies over the link (8 MiB at 25 GB/s each) and two 1 ms kernels,
    # one after the other: the second waits for the synchronous copy
    want = 2 * n / 25e9 + 2e-3
    if abs(inf["total_s"] - want) > 2e-6 or inf["bytes_up"] != n or inf["bytes_down"] != n:
        fail("replay infinite: %s, want %.6f s and %d bytes each way" % (inf, want, n))
    p = run(["play", path, "--policy", "demand", "--json", "--capacity", "1T"])
    if p.returncode != 0:
        fail("vx play of the copies: %s" % p.stderr)
    live = json.loads(p.stdout)
    if abs(live["total_s"] - inf["total_s"]) > 2e-6 or live["bytes_up"] != n or \
            live["bytes_down"] != n:
        fail("played copies: live %s, replay infinite %s" % (live, inf))
    # all managed (plain Unified Memory), the copy lands on the host and the
    # first kernel faults its 4 chunks in: live and offline to the ns
    p = run(["replay", path, "--policy", "demand", "--json"])
    off = json.loads(p.stdout)
    p = run(["play", path, "--policy", "demand", "--json"],
            env={"VX_MOVABLE": "100%", "VX_NATIVE_MAX": "0"})
    um = json.loads(p.stdout)
    if off["faults"] != 4 or off["bytes_up"] != 2 * n or um["faults"] != 4 or \
            um["bytes_up"] != off["bytes_up"] or abs(um["total_s"] - off["total_s"]) > 2e-6:
        fail("copies into managed memory: live %s, replay %s" % (um, off))


def shared_trace(path):
    """One 16 MiB allocation (8 chunks) holding three tensors, as a caching
    allocator's segment does: chunks 0-2, 2-5 (chunk 2 shared: the tensors
    are not chunk-aligned) and 6-7, each read by its own kernel, round after
    round."""
    mib = 1 << 20
    b = b"VXTRACE\0" + struct.pack("<HHIQQQ", 1, 40, 1, 2 * mib, 0, 64 * mib)

    def rec(kind, payload):
        return struct.pack("<B3xI", kind, len(payload)) + payload

    def launch(kernel, first, count):
        return rec(3, struct.pack("<QQQQII", 0, kernel, 0, 100000, 0, 1) +
                   struct.pack("<QIIII", 1, first, count, 1, 0))

    b += rec(1, struct.pack("<QQQQII", 0, 1, 0, 16 * mib, 0, 0))
    for _ in range(4):
        b += launch(0x21, 0, 3) + launch(0x22, 2, 4) + launch(0x23, 6, 2)
    b += rec(2, struct.pack("<QQ", 0, 1))
    with open(path, "wb") as f:
        f.write(b)


def launch_ranges(path):
    """(first, count) of every launch's ranges in a VX_TRACE file."""
    with open(path, "rb") as f:
        b = f.read()
    pos, out = struct.unpack_from("<H", b, 10)[0], []
    while pos < len(b):
        kind, n = b[pos], struct.unpack_from("<I", b, pos + 4)[0]
        d = pos + 8
        if kind == 3:
            nr = struct.unpack_from("<I", b, d + 36)[0]
            out.append([struct.unpack_from("<II", b, d + 40 + 24 * i + 8) for i in range(nr)])
        pos = d + n
    return out


def case_shared(tmp):
    path, rec = os.path.join(tmp, "s.vxt"), os.path.join(tmp, "rec.vxt")
    shared_trace(path)
    p = run(["play", path, "--policy", "predict", "--json", "--capacity", "12M"],
            env={"VX_TRACE": rec})
    if p.returncode != 0:
        fail("vx play of the shared chunks: %s" % p.stderr)
    got = launch_ranges(rec)
    if len(got) != 12:
        fail("recorded %d launches, played 12" % len(got))
    # from the second round on, libvx has seen every tensor's pointer
    want = [[(0, 3)], [(2, 4)], [(6, 2)]] * 3
    if got[3:] != want:
        fail("libvx saw ranges %s, the trace has %s" % (got[3:], want))


def case_install(tmp):
    # an install finds libvx.so and, once the opt-in component is installed,
    # the simulator in <libdir>/vx/simcuda; before that it names what is missing
    path, _ = synth(tmp, "cnn,iters=1")
    prefix = os.path.join(tmp, "inst")
    build = os.environ["VX_TEST_BIN_DIR"]
    for extra in ([], ["--component", "simcuda"]):
        p = subprocess.run(["cmake", "--install", build, "--prefix", prefix] + extra,
                           capture_output=True, text=True)
        if p.returncode != 0:
            fail("cmake --install %s: %s" % (extra, p.stderr))
        if not extra:
            env = {k: v for k, v in base_env().items() if k != "LD_LIBRARY_PATH"}
            p = subprocess.run([os.path.join(prefix, "bin", "vx"), "play", path], env=env,
                               capture_output=True, text=True)
            if p.returncode != 1 or "libcuda.so.1" not in p.stderr or \
                    "vx/simcuda" not in p.stderr:
                fail("installed vx play without the simulator: %d %r" % (p.returncode, p.stderr))
    env = {k: v for k, v in base_env().items() if k != "LD_LIBRARY_PATH"}
    p = subprocess.run([os.path.join(prefix, "bin", "vx"), "play", path, "--json", "--policy",
                        "demand"], env=env, capture_output=True, text=True)
    if p.returncode != 0 or json.loads(p.stdout)["total_s"] <= 0:
        fail("installed vx play: %d %s %s" % (p.returncode, p.stdout, p.stderr))


with tempfile.TemporaryDirectory() as tmp:
    {"json": case_json, "errors": case_errors, "big": case_big, "copies": case_copies,
     "shared": case_shared, "install": case_install}[sys.argv[2]](tmp)
print("ok")
