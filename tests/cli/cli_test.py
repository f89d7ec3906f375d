#!/usr/bin/env python3
"""cli_test.py: scenario tests of the vx command-line tool, one per argument
(run, env, stat, stat_demand, top, pty, pty_narrow, pty_rows, report, doctor, usage, man, e2e, install, deb).
Exit 0 = pass, 1 = fail, 77 = skip (with the reason on stderr)."""
import glob
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import xml.dom.minidom

BIN = os.environ["VX_TEST_BIN_DIR"]
SRC = os.environ["VX_TEST_SRC_DIR"]
CLI = os.environ["VX_TEST_CLI_DIR"]
SAN = os.environ.get("VX_TEST_SAN_RUNTIME", "")
VX = os.path.join(BIN, "vx")
LIBVX = os.path.join(BIN, "libvx.so")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Skip(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def helper(name):
    return os.path.join(CLI, name)


def preload_env(extra=None):
    """Environment for commands that get libvx.so preloaded by vx run: the
    sanitizer runtime must come first, and foreign programs' leaks are not ours."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if SAN:
        env["LD_PRELOAD"] = SAN
        env["ASAN_OPTIONS"] = "verify_asan_link_order=0:detect_leaks=0"
    env.update(extra or {})
    return env


def vx(*args, env=None, stdin=None, timeout=30, cwd=None):
    return subprocess.run([VX, *args], capture_output=True, text=True, env=env,
                          stdin=stdin, timeout=timeout, cwd=cwd)


def libvx_loads():
    """None if build/libvx.so loads into an uninstrumented program, else why not.
    (A sanitizer build's dlsym hook runs inside the sanitizer's start-up.)"""
    if not os.path.exists(LIBVX):
        return "build/libvx.so is not built"
    env = preload_env()
    env["LD_PRELOAD"] = (SAN + ":" if SAN else "") + LIBVX
    r = subprocess.run(["/bin/true"], env=env)
    if r.returncode < 0:
        return (f"libvx.so kills /bin/true at load with signal {-r.returncode} in this build "
                "(LD_PRELOAD=sanitizer runtime:libvx.so): a libvx bug, reported")
    return None


def need_libvx():
    why = libvx_loads()
    if why:
        raise Skip(why)


def env_lines(out):
    return dict(l.split("=", 1) for l in out.splitlines() if "=" in l)


# ---- vx run ----

def test_run():
    """The static helper runs under every build (LD_PRELOAD cannot reach it);
    ordinary dynamic programs follow when libvx.so loads into them."""
    real = os.path.realpath(LIBVX)
    dummy = helper("libcli_dummy.so")
    static = helper("cli_static")
    want_pre = (SAN + ":" if SAN else "") + real
    tmp = tempfile.mkdtemp()
    r = vx("run", "--device-limit", "2G,1G", "--policy", "demand", "--log", "info",
           "--report", "r.json", "--env", "VX_RESERVE=128M", "--env", "OTHER=x y", "--",
           static, "env", env=preload_env(), cwd=tmp)
    check(r.returncode == 0, f"vx run env: {r.returncode} {r.stderr}")
    check("statically linked" in r.stderr, f"no static warning: {r.stderr}")
    e = env_lines(r.stdout)
    check(e.get("LD_PRELOAD") == want_pre, f"LD_PRELOAD {e.get('LD_PRELOAD')!r} != {want_pre!r}")
    want = {"VX_DEVICE_LIMIT": "2G,1G", "VX_POLICY": "demand", "VX_LOG": "info",
            "VX_RESERVE": "128M", "OTHER": "x y"}
    for k, v in want.items():
        check(e.get(k) == v, f"{k}={e.get(k)!r}, want {v!r}")
    check(os.path.realpath(e.get("VX_REPORT", "")) == os.path.realpath(os.path.join(tmp, "r.json")),
          f"VX_REPORT made absolute: {e.get('VX_REPORT')}")
    # an existing LD_PRELOAD is kept, after libvx; libvx is never added twice
    # (with libvx.so already in LD_PRELOAD, vx itself loads it: only where it can.
    # A sanitizer build of libvx.so crashes when another library sits between
    # the runtime and it: its dlsym hook calls dlopen during the runtime's start-up.)
    olds = [dummy]
    if not libvx_loads():
        olds += [f"{real}:{dummy}"] + ([] if SAN else [f"{dummy} {LIBVX}"])
    for old in olds:
        env = preload_env()
        env["LD_PRELOAD"] = (SAN + ":" if SAN else "") + old
        r = vx("run", "--", static, "env", env=env)
        got = env_lines(r.stdout).get("LD_PRELOAD")
        check(got == want_pre + ":" + dummy, f"LD_PRELOAD from {old!r}: {got!r}")
    # exit status, signals and pid are the command's own (vx run execs)
    r = vx("run", "--", static, "exit", "7", env=preload_env())
    check(r.returncode == 7, f"exit 7 -> {r.returncode}")
    r = vx("run", "--", static, "kill", str(int(signal.SIGTERM)), env=preload_env())
    check(r.returncode == -signal.SIGTERM, f"SIGTERM -> {r.returncode}")
    r = subprocess.run(["sh", "-c", f'"{VX}" run -- "{static}" kill {int(signal.SIGINT)} 2>/dev/null; echo $?'],
                       capture_output=True, text=True, env=preload_env())
    check(r.stdout.strip() == str(128 + signal.SIGINT), f"wrapper shell saw {r.stdout!r}")
    p = subprocess.Popen([VX, "run", "--", static, "pid"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=preload_env())
    out, _ = p.communicate(timeout=30)
    check(int(out) == p.pid, "vx run must exec the command (same pid)")
    r = vx("run", "--", "/nonexistent/cmd", env=preload_env())
    check(r.returncode == 127 and "nonexistent" in r.stderr, f"missing command: {r.returncode}")
    # values are checked with libvx's parser; unknown VX_ names refused
    for args in (["--device-limit", "8Q"], ["--policy", "fast"], ["--log", "loud"],
                 ["--env", "VX_BOGUS=1"], ["--env", "VX_PREFETCH_DISTANCE=-1"], ["--env", "=x"]):
        r = vx("run", *args, "--", static, env=preload_env())
        check(r.returncode == 2 and "vx run: " in r.stderr and "Try 'vx run --help'." in r.stderr
              and "usage:" not in r.stderr, f"{args}: {r.returncode} {r.stderr}")
    r = vx("run", "--device-limit", "8Q", "--", static, env=preload_env())
    check("VX_DEVICE_LIMIT" in r.stderr, "the error names the variable")
    r = vx("run", "--", static, env=preload_env({"VX_POLICY": "nope"}))
    check("VX_POLICY" in r.stderr and "warning" in r.stderr, f"no warning for bad env: {r.stderr}")
    r = vx("run", "--", static, env=preload_env({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}))
    check(r.returncode == 0 and "expandable_segments" in r.stderr, f"no VMM warning: {r.stderr}")
    need_libvx()
    # ordinary dynamic programs, with libvx.so loaded into them
    r = vx("run", "--policy", "demand", "--", "env", env=preload_env())
    e = env_lines(r.stdout)
    check(r.returncode == 0 and e.get("LD_PRELOAD") == want_pre and e.get("VX_POLICY") == "demand",
          f"env under vx run: {r.returncode} {e.get('LD_PRELOAD')}")
    r = vx("run", "--", "sh", "-c", "exit 7", env=preload_env())
    check(r.returncode == 7, f"sh exit 7 -> {r.returncode}")
    r = vx("run", "--", "sh", "-c", "kill -TERM $$", env=preload_env())
    check(r.returncode == -signal.SIGTERM, f"sh SIGTERM -> {r.returncode}")
    r = subprocess.run(["sh", "-c", f'"{VX}" run -- sh -c "kill -INT \\$\\$"; echo $?'],
                       capture_output=True, text=True, env=preload_env())
    check(r.stdout.strip() == str(128 + signal.SIGINT), f"wrapper shell saw {r.stdout!r}")
    r = vx("run", "--", "true", env=preload_env())
    check(r.returncode == 0 and r.stderr == "", f"unexpected output: {r.stderr!r}")


# ---- vx env ----

def options_def():
    with open(os.path.join(SRC, "core", "options.def")) as f:
        return re.findall(r'^VX_OPTION\((\w+),\s*(\w+),\s*"([^"]*)"', f.read(), re.M)


def test_env():
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VX_")}
    r = vx("env", "--json", env=clean)
    check(r.returncode == 0, f"clean env: {r.returncode} {r.stderr}")
    d = json.loads(r.stdout)
    rows = options_def()
    check([o["name"] for o in d["options"]] == ["VX_" + n for n, _, _ in rows], "names/order")
    for o, (n, t, dflt) in zip(d["options"], rows):
        check(o["type"] == t and o["default"] == dflt and o["value"] == dflt and not o["set"]
              and o["valid"], f"row {o}")
    env = dict(clean, VX_POLICY="bogus", VX_DEVICE_LIMIT="8G,50%", VX_FOO="1")
    r = vx("env", "--json", env=env)
    check(r.returncode == 1, "invalid values exit 1")
    d = json.loads(r.stdout)
    by = {o["name"]: o for o in d["options"]}
    check(not by["VX_POLICY"]["valid"] and "predict" in by["VX_POLICY"]["error"], "bad policy")
    check(by["VX_DEVICE_LIMIT"]["valid"] and by["VX_DEVICE_LIMIT"]["set"]
          and by["VX_DEVICE_LIMIT"]["value"] == "8G,50%", "device limit")
    check(d["unknown"] == ["VX_FOO"], f"unknown {d['unknown']}")
    r = vx("env", env=env)
    check("VX_POLICY=bogus  [INVALID" in r.stdout and "VX_FOO=1  [UNKNOWN" in r.stdout
          and "VX_DEVICE_LIMIT=8G,50%  [set]" in r.stdout, r.stdout)
    for n, _, _ in rows:
        check(f"VX_{n}=" in r.stdout, f"VX_{n} missing from text")
    r = vx("env", "--markdown", env=env)
    md = r.stdout.splitlines()
    check(r.returncode == 0 and md[0] == "| variable | type | default | meaning |"
          and len(md) == 2 + len(rows), "markdown table")
    check(md[4].startswith("| `VX_LOG` | ENUM | `warn` | ") and "error\\|warn" in md[4], md[4])
    r = vx("env", "--markdown", "--json")
    check(r.returncode == 2, "--markdown with --json is a usage error")


# ---- vx stat / vx top against a segment with known values ----

GiB = 1 << 30


class Seg:
    """cli_seg: a live segment with known values; closing stdin ends it."""

    def __init__(self, ndev=2, *extra, env=None):
        self.p = subprocess.Popen([helper("cli_seg"), str(ndev), *extra], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True,
                                  env=dict(os.environ, **(env or {})))
        line = self.p.stdout.readline()
        check(line.startswith("ready "), f"cli_seg: {line!r}")
        self.pid = int(line.split()[1])

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def counter_names():
    """counters.def's counters in order: a VX_GAUGE row is two, name and name_peak."""
    with open(os.path.join(SRC, "core", "counters.def")) as f:
        rows = re.findall(r"^VX_(COUNTER|GAUGE)\((\w+),", f.read(), re.M)
    return [n for kind, name in rows for n in ([name] if kind == "COUNTER" else [name, name + "_peak"])]


def expected(d, i, name):
    special = {"native_bytes": 6 * GiB // (d + 1), "host_tier_bytes": 4 * GiB, "nvme_bytes": 16 * GiB}
    return special.get(name, (d + 1) * 1000 + i)


def test_stat():
    seg = Seg(2)
    try:
        r = vx("stat", str(seg.pid), "--json")
        check(r.returncode == 0, f"stat: {r.returncode} {r.stderr}")
        procs = json.loads(r.stdout)["processes"]
        check(len(procs) == 1 and procs[0]["pid"] == seg.pid and "cli_seg 2" in procs[0]["cmdline"],
              f"{procs}")
        devs = procs[0]["devices"]
        check(len(devs) == 2, "two devices")
        names = counter_names()
        for d, dev in enumerate(devs):
            check(dev["limits"] == {"device": 8 * GiB, "host": 16 * GiB, "nvme": 64 * GiB}, f"{dev['limits']}")
            check(list(dev["counters"]) == names, "counter names in counters.def order")
            for i, n in enumerate(names):
                check(dev["counters"][n] == expected(d, i, n), f"dev {d} {n}={dev['counters'][n]}")
        r = vx("stat", "--json")
        check(seg.pid in [p["pid"] for p in json.loads(r.stdout)["processes"]], "listed in all")
        r = vx("stat", str(seg.pid))
        check(r.returncode == 0 and "native_bytes" in r.stdout and "(6.0G)" in r.stdout
              and "device 1 limits: device 8.0G host 16G nvme 64G" in r.stdout, r.stdout)
        check(re.search(r"^  device 1 demand migrations, average since start: up \S+/s down \S+/s "
                        r"\(the driver's own\)$", r.stdout, re.M), r.stdout)
        # the Prometheus text format: each metric's HELP and TYPE once, then its samples
        r = vx("stat", str(seg.pid), "--prometheus")
        check(r.returncode == 0 and r.stderr == "", f"prometheus: {r}")
        sample = re.compile(r'^(vx_[a-z_]+)\{pid="(\d+)",device="(\d+)",command="([^"\\]|\\.)*"'
                            r'(,limit="(device|host|nvme)")?\} (\d+)$')
        seen, types, values = [], {}, {}
        for line in r.stdout.splitlines():
            if line.startswith("# TYPE "):
                _, _, metric, kind = line.split()
                check(metric not in types, f"TYPE twice: {metric}")
                types[metric] = kind
                seen.append(metric)
                continue
            if line.startswith("# HELP "):
                continue
            m = sample.match(line)
            check(m, f"not a sample line: {line!r}")
            check(m.group(1) == seen[-1], f"{m.group(1)} apart from its TYPE line")
            values[(m.group(1), int(m.group(3)), m.group(6))] = int(m.group(7))
        for i, n in enumerate(names):
            sum_kind = (n not in ("native_bytes",) and types.get(f"vx_{n}_total") == "counter")
            metric = f"vx_{n}_total" if sum_kind else f"vx_{n}"
            check(metric in types, f"{metric} missing")
            for d in range(2):
                check(values[(metric, d, None)] == expected(d, i, n), f"{metric} dev {d}")
        check(values[("vx_limit_bytes", 1, "host")] == 16 * GiB, "limits")
        check(types["vx_native_bytes"] == "gauge", "CUR counters are gauges")
    finally:
        seg.close()
    r = vx("stat", str(seg.pid))
    check(r.returncode == 1 and "no vx statistics" in r.stderr, "gone after exit")
    seg = Seg(1, b"x\xff\xc3\xa9\x01")  # not UTF-8, and a control character
    try:
        r = vx("stat", str(seg.pid), "--json")
        cmd = json.loads(r.stdout)["processes"][0]["cmdline"]
        check(cmd.endswith("x\ufffd\u00e9\u0001"), f"cmdline escaped: {cmd!r}")
        r = vx("top", "--once", str(seg.pid))
        check(f"PID {seg.pid} " in r.stdout and "x???" in r.stdout, "top shows unprintables as ?")
    finally:
        seg.close()
    # a driver that does not report its own migrations: "not measured", never a zero
    seg = Seg(1, env={"CLI_SEG_NO_DEMAND": "1"})
    try:
        r = vx("stat", str(seg.pid))
        check("  device 0 demand migrations: not measured (the driver does not report them)\n" in r.stdout
              and re.search(r"^    demand_up_bytes +not measured$", r.stdout, re.M), r.stdout)
        dev = json.loads(vx("stat", str(seg.pid), "--json").stdout)["processes"][0]["devices"][0]
        check(dev.get("demand_migrations") == "not measured", f"{dev}")
        r = vx("stat", str(seg.pid), "--prometheus")
        check("# TYPE vx_demand_up_bytes_total counter" in r.stdout
              and not re.search(r"^vx_demand_(up|down)_bytes_total\{", r.stdout, re.M), "no sample, not 0")
    finally:
        seg.close()
    # a dead process's segment is removed; a corrupt or foreign one does not crash
    seg = Seg(1)
    path = f"/dev/shm/vx-{os.geteuid()}-{seg.pid}"
    seg.p.kill()
    seg.p.wait()
    check(os.path.exists(path), "SIGKILL leaves the segment")
    vx("stat")
    check(not os.path.exists(path), "vx stat reaps a dead process's segment")
    me = os.getpid()
    bad = f"/dev/shm/vx-{os.geteuid()}-{me}"
    try:
        # magic and version right, sizes wrong: the reader must not trust them
        hdr = b"VXSTATS\0" + struct.pack("=IIQiIII", 1, 312, 1 << 40, me, os.geteuid(), 64, 4096)
        with open(bad, "wb") as f:
            f.write(hdr + b"\xff" * 600)
        os.chmod(bad, 0o600)
        r = vx("stat", str(me))
        check(r.returncode == 1 and "Bad message" in r.stderr, f"corrupt: {r.returncode} {r.stderr}")
        r = vx("top", "--once")
        check(r.returncode == 0, "top survives a corrupt segment")
        os.chmod(bad, 0o644)
        r = vx("stat", str(me))
        check(r.returncode == 1 and "Permission denied" in r.stderr, f"0644: {r.stderr}")
        if os.geteuid() == 0:
            os.chmod(bad, 0o600)
            os.chown(bad, 65534, 65534)
            r = vx("stat", str(me))
            check(r.returncode == 1 and "not permitted" in r.stderr, f"foreign: {r.stderr}")
    finally:
        os.unlink(bad)


def visible(text):
    return [ANSI.sub("", l).rstrip("\r") for l in text.split("\n")]


def check_width(text):
    for l in visible(text):
        check(len(l) <= 80, f"line of {len(l)} columns: {l!r}")


def test_top():
    long_args = ["arg%03d" % i for i in range(60)]
    seg = Seg(2, "x", *long_args)
    try:
        r = vx("top", "--once")
        check(r.returncode == 0, r.stderr)
        out = r.stdout
        check("\x1b" not in out, "--once prints no escapes")
        check_width(out)
        lines = out.splitlines()
        check(lines[0].startswith("vx top - "), lines[0])
        mine = [l for l in lines if l.startswith(f"PID {seg.pid} ")]
        check(len(mine) == 1 and "cli_seg 2 x arg000" in mine[0], f"{mine}")
        i = lines.index(mine[0])
        block = lines[i + 1:i + 11]
        check(block[0].startswith(" gpu0 device [###############.....]   6.0G/8.0G"), block[0])
        check(block[1].startswith("      host   [#####...............]   4.0G/16G"), block[1])
        check(block[2].startswith("      nvme   [#####...............]    16G/64G"), block[2])
        check("prefetch hit" in block[3] and "faults avoided" in block[3], block[3])
        # the driver's own migrations beside vx's (cli_seg: measured)
        check(re.match(r"      demand up \S+/s +down \S+/s +\(the driver's own\)$", block[4]), block[4])
        check(block[5].startswith("      nvme read "), block[5])
        check(block[6].startswith(" gpu1 device [########............]   3.0G/8.0G"), block[6])
        names = counter_names()
        hits = expected(0, names.index("prefetch_hits"), "prefetch_hits")
        misses = expected(0, names.index("prefetch_misses"), "prefetch_misses")
        check(f"{100.0 * hits / (hits + misses):.1f}%" in block[3], block[3])
        r = vx("top", "--once", str(seg.pid))
        check(f"PID {seg.pid} " in r.stdout and r.stdout.count("PID ") == 1, "only that pid")
        r = vx("top", "1", "--once")
        check(r.returncode == 1 and "PID " not in r.stdout and "no vx statistics for pid 1" in r.stderr,
              f"pid 1 is not under vx: exit 1, as vx stat 1: {r}")
        r = vx("top", "--count", "2", "--interval", "0.1")
        check(r.returncode == 0 and r.stdout.count("vx top - ") == 2, "two frames when piped")
    finally:
        seg.close()


def test_pty():
    seg = Seg(1, "tick")
    try:
        for key in ("q", "ctrl-c"):
            out = os.path.join(tempfile.mkdtemp(), "tty")
            # Only our segment: other vx processes (tests running beside this one)
            # would push it off the pseudo-terminal's 24 rows.
            r = subprocess.run([helper("cli_pty"), out, "3", key, VX, "top", str(seg.pid),
                                "--interval", "0.2"],
                               capture_output=True, text=True, timeout=30)
            check(r.returncode == 0, f"{key}: {r.stdout} {r.stderr}")
            text = open(out, encoding="utf-8", errors="replace").read()
            check(text.count("\x1b[H\x1b[2J") >= 3, "frames clear the screen")
            check(text.startswith("\x1b[?1049h"), "the alternate screen first")
            check(text.rstrip().endswith("\x1b[?25h\x1b[?1049l"), "cursor and the user's screen back at exit")
            check_width(text.replace("\x1b[H\x1b[2J", "\n"))
            frames = [visible(f) for f in text.split("\x1b[H\x1b[2J")[2:]]
            # The newest frame that shows our process (a frame drawn while the
            # quit key arrives may be cut short on a loaded machine); rates
            # are live from the second frame on, which these all are.
            # A frame cut short may also end inside our block: the newest one
            # whose block reaches its rate lines.
            def rates(f):
                mine = [i for i, l in enumerate(f) if l.startswith(f"PID {seg.pid} ")]
                if not mine or len(f) <= mine[0] + 5 or \
                        not f[mine[0] + 5].lstrip().startswith("demand up "):
                    return None
                return f[mine[0] + 4], f[mine[0] + 5]
            shown = [f for f in frames if any(l.startswith(f"PID {seg.pid} ") for l in f)]
            check(shown, f"pid missing from every frame after the first: {frames}")
            whole = [f for f in shown if rates(f)]
            check(whole, f"no frame shows our block whole: {shown}")
            up, demand = rates(whole[-1])
            m = re.match(r"\s+up (\S+)/s", up)
            check(m and m.group(1) not in ("0", "0.0"), f"up rate should be live: {up!r}")
            m = re.match(r"\s+demand up (\S+)/s", demand)
            check(m and m.group(1) not in ("0", "0.0"), f"demand rate should be live: {demand!r}")
    finally:
        seg.close()


def pty_frame(seg, cols):
    """The last frame of `vx top PID` on a pseudo-terminal of cols columns that shows seg."""
    out = os.path.join(tempfile.mkdtemp(), "tty")
    env = dict(os.environ, CLI_PTY_COLS=str(cols))
    r = subprocess.run([helper("cli_pty"), out, "2", "q", VX, "top", str(seg.pid), "--interval", "0.2"],
                       capture_output=True, text=True, timeout=30, env=env)
    check(r.returncode == 0, f"{r.stdout} {r.stderr}")
    text = open(out, encoding="utf-8", errors="replace").read()
    frames = [visible(f) for f in text.split("\x1b[H\x1b[2J")[1:]]
    shown = [f for f in frames if any(l.startswith(f"PID {seg.pid} ") for l in f)]
    check(shown, f"our process in no frame: {frames}")
    return shown[-1]


def test_pty_narrow():
    """A 50-column terminal: the bars go, every number stays whole."""
    seg = Seg(1)
    try:
        f = pty_frame(seg, 50)
        for l in f:
            check(len(l) <= 50, f"line of {len(l)} columns: {l!r}")
        check(any(re.match(r" gpu0 device\s+6\.0G/8\.0G ", l) for l in f), f"device line: {f}")
        check(any(re.match(r"\s+host\s+4\.0G/16G", l) for l in f), f"host line: {f}")
        # the rate lines wrap between fields: every figure whole, on some line
        names = counter_names()
        avoided = expected(0, names.index("faults_avoided"), "faults_avoided")
        fails = expected(0, names.index("alloc_failures"), "alloc_failures")
        check(any(l.strip() == f"faults avoided {avoided}" or l.endswith(f" faults avoided {avoided}")
                  for l in f), f"faults avoided cut: {f}")
        check(any(l.endswith(f"alloc failures {fails}") for l in f), f"alloc failures cut: {f}")
        check(any(re.match(r"\s+demand up \S+/s +down \S+/s$", l) for l in f), f"demand rates: {f}")
    finally:
        seg.close()
    # a driver that does not report its own migrations: said, not a zero
    seg = Seg(1, env={"CLI_SEG_NO_DEMAND": "1"})
    try:
        for cols in (80, 40):
            f = pty_frame(seg, cols)
            for l in f:
                check(len(l) <= cols, f"line of {len(l)} columns at {cols}: {l!r}")
            body = " ".join(l.strip() for l in f)
            check("demand migrations not measured" in body and "demand up" not in body, f"{cols}: {f}")
    finally:
        seg.close()


def test_pty_rows():
    """16 devices do not fit 24 rows: a live frame keeps to the screen and says what it left out."""
    seg = Seg(16)
    try:
        out = os.path.join(tempfile.mkdtemp(), "tty")
        r = subprocess.run([helper("cli_pty"), out, "2", "q", VX, "top", str(seg.pid), "--interval", "0.2"],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, f"{r.stdout} {r.stderr}")
        text = open(out, encoding="utf-8", errors="replace").read()
        frames = [visible(f) for f in text.split("\x1b[H\x1b[2J")[1:]]
        full = [f for f in frames if any(l.startswith("... ") for l in f)]
        check(full, f"no frame says what it cut: {frames}")
        for f in full:
            body = [l for l in f if l.strip()]
            check(len(body) <= 23, f"{len(body)} lines on a 24-row terminal")
            check(re.match(r"\.\.\. \d+ more lines: a taller terminal$", body[-1]), body[-1])
    finally:
        seg.close()


# ---- vx report ----

REPORT = {
    "command": "python train.py --lr 1e-3 & <more>",
    "devices": [{"device": 0, "native_bytes_peak": 8 * GiB, "bytes_up": 3 * GiB, "limit_bytes": 8 * GiB,
                 "prefetch_hits": 90, "prefetch_misses": 10}],
    "timeline": [{"t": 0, "native": 0, "managed": 0, "host": 0, "nvme": 0, "bytes_up": 0, "bytes_down": 0},
                 {"t": 1, "native": 4 * GiB, "managed": GiB, "host": 0, "nvme": 0,
                  "bytes_up": GiB, "bytes_down": 0},
                 {"t": 2, "native": 6 * GiB, "managed": 3 * GiB, "host": 2 * GiB, "nvme": GiB,
                  "bytes_up": 3 * GiB, "bytes_down": 2 * GiB}],
    "sites": [{"bytes_spilled": 1 << 20, "bytes": 5 << 20, "count": 3, "stack": ["small <a>", "main"]},
              {"bytes_spilled": 9 << 20, "bytes": 9 << 20, "count": 1, "stack": ["big & b", "main"]}],
}


def svg_of(report, tmp):
    path = os.path.join(tmp, "r.json")
    with open(path, "w") as f:
        json.dump(report, f)
    svg = os.path.join(tmp, "r.svg")
    r = vx("report", path, "--svg", svg, "--text")
    check(r.returncode == 0, f"report: {r.stderr}")
    return r.stdout, xml.dom.minidom.parse(svg)


def texts(doc):
    return ["".join(n.data for n in t.childNodes if n.nodeType == n.TEXT_NODE)
            for t in doc.getElementsByTagName("text")]


def test_report():
    tmp = tempfile.mkdtemp()
    other = os.path.join(tmp, "other.json")  # JSON, but not an exit report
    with open(other, "w") as f:
        f.write('{"x":1}')
    r = vx("report", other)
    check(r.returncode == 1 and "not a vx report" in r.stderr and r.stdout == "", f"{r}")
    out, doc = svg_of(REPORT, tmp)
    ids = [p.getAttribute("id") for p in doc.getElementsByTagName("path")]
    check(ids == ["tier-native", "tier-managed", "tier-host", "tier-nvme"], f"{ids}")
    for p in doc.getElementsByTagName("path"):
        check(len(re.findall(r"[ML][\d.]+,[\d.]+", p.getAttribute("d"))) == 6, "3 samples, top+bottom")
    lines = {p.getAttribute("id"): p.getAttribute("points") for p in doc.getElementsByTagName("polyline")}
    check(set(lines) == {"traffic-up", "traffic-down"}, f"{lines}")
    up = [float(xy.split(",")[1]) for xy in lines["traffic-up"].split()]
    check(up[0] > up[1] > up[2], f"up rate 0, 1G/s, 2G/s rises: {up}")
    t = texts(doc)
    check(any("python train.py --lr 1e-3 & <more>" in x for x in t), "title, escaped")
    # round ticks under both panels, 0.5 s apart over these 2 s
    check(all(t.count(f"{v} s") == 2 for v in ("0", "0.5", "1", "1.5", "2")), f"time ticks: {t}")
    # the budget, dashed across the tier panel, and the y axis in steps with units
    b = [l for l in doc.getElementsByTagName("line") if l.getAttribute("id") == "budget"]
    check(len(b) == 1 and any(x == "device budget 8.0G" for x in t), f"budget line: {t}")
    check(sum(1 for l in doc.getElementsByTagName("line") if l.getAttribute("class") == "ytick") == 8,
          "four y steps per panel")
    check("12G" in t and "6.0G" in t, f"y axis in units: {t}")
    # a report from a driver that does not count its own migrations says so
    nm = dict(REPORT, devices=[dict(REPORT["devices"][0], demand_migrations="not measured")])
    nm_path = os.path.join(tmp, "nm.json")
    with open(nm_path, "w") as f:
        json.dump(nm, f)
    r = vx("report", nm_path)
    check(r.returncode == 0 and re.search(r"demand migrations\s+not measured", r.stdout), f"{r.stdout}")
    # folded stacks for flame graphs: outermost first, weighted by bytes spilled
    fpath = os.path.join(tmp, "sites.folded")
    rep_path = os.path.join(tmp, "r.json")
    with open(rep_path, "w") as f:
        json.dump(REPORT, f)
    r = vx("report", rep_path, "--folded", fpath)
    check(r.returncode == 0 and r.stdout == "", f"--folded: {r}")
    with open(fpath) as f:
        lines = f.read().splitlines()
    check(lines == ["main;big & b 9437184", "main;small <a> 1048576"], f"folded: {lines}")
    # a long stack is cut on its line, whole in the line's title
    long_rep = dict(REPORT, sites=[{"bytes_spilled": 1, "bytes": 1, "count": 1,
                                    "stack": [f"frame{i}(libx.so+0x{i:x})" for i in range(15)]}])
    _, ldoc = svg_of(long_rep, tmp)
    site = [x for x in ldoc.getElementsByTagName("text") if x.getAttribute("class") == "site"][0]
    shown = "".join(n.data for n in site.childNodes if n.nodeType == n.TEXT_NODE)
    title = site.getElementsByTagName("title")[0].firstChild.data
    check(len(shown) <= 130 and shown.endswith("...") and "frame14" in title, f"site line: {shown!r}")
    sites = [x for x in t if "spilled of" in x]
    check(len(sites) == 2 and sites[0].startswith("1. 9.0M") and "big & b < main" in sites[0]
          and "small <a>" in sites[1], f"{sites}")
    check("timeline: 3 samples over 2.0 s" in out and "prefetch hit rate" in out
          and "90.0%" in out, out)
    no_tl = dict(REPORT)
    del no_tl["timeline"], no_tl["sites"]
    out, doc = svg_of(no_tl, tmp)
    check("no timeline recorded" in texts(doc), "no timeline text")
    check(not doc.getElementsByTagName("path"), "no areas without a timeline")
    check("timeline: none recorded" in out and "none recorded (run with VX_SITES=1)" in out, out)
    bad = os.path.join(tmp, "bad.json")
    for content in ('{"timeline": [1, 2', "[1]", "\xff"):
        with open(bad, "w", encoding="latin-1") as f:
            f.write(content)
        r = vx("report", bad, "--svg", os.path.join(tmp, "x.svg"))
        check(r.returncode == 1 and r.stderr.startswith("vx report: "), f"{content!r}: {r.stderr}")
    r = vx("report", os.path.join(tmp, "missing.json"))
    check(r.returncode == 1 and "No such file" in r.stderr, r.stderr)


# ---- vx doctor ----

def doctor(*args, wrap=(), env=None):
    r = subprocess.run([*wrap, VX, "doctor", "--json", *args], capture_output=True, text=True,
                       env=env or preload_env(), timeout=60)
    d = json.loads(r.stdout)
    checks = {c["name"]: c for c in d["checks"]}
    fails = [c for c in d["checks"] if c["verdict"] == "fail"]
    check(r.returncode == (1 if fails else 0) and d["ok"] == (not fails), f"exit {r.returncode} vs {fails}")
    return r.returncode, checks


def test_doctor():
    have_sim = os.path.exists(os.path.join(BIN, "tests", "simcuda", "libcuda.so.1"))
    tmp = tempfile.mkdtemp()
    rc, c = doctor("--nvme-dir", tmp, "--program", helper("cli_static"))
    if have_sim:
        check(c["driver"]["verdict"] == "ok" and "13.0 (13000)" in c["driver"]["detail"], f"{c['driver']}")
        check(c["managed[0]"]["verdict"] == "ok" and "CONCURRENT_MANAGED_ACCESS=1" in c["managed[0]"]["detail"]
              and "PAGEABLE_MEMORY_ACCESS=0" in c["managed[0]"]["detail"], f"{c['managed[0]']}")
        check(c["discard"]["verdict"] == "ok", f"{c['discard']}")
    check(c["nvme-dir"]["verdict"] in ("ok", "warn") and tmp in c["nvme-dir"]["detail"], f"{c['nvme-dir']}")
    check(c["program"]["verdict"] == "fail" and "statically linked" in c["program"]["detail"], f"{c['program']}")
    check(c["preload"]["verdict"] == ("fail" if libvx_loads() else "ok"), f"{c['preload']}")
    if os.geteuid() == 0:  # a program set-user-ID to someone else: secure-execution mode
        suid = os.path.join(tmp, "suid")
        shutil.copy("/bin/true", suid)
        os.chown(suid, 65534, 65534)
        os.chmod(suid, 0o4755)
        _, cs = doctor("--program", suid)
        check(cs["program"]["verdict"] == "fail" and "set-user" in cs["program"]["detail"], f"{cs['program']}")
        r = vx("run", "--", suid, env=preload_env())
        check(r.returncode == 0 and "set-user/group-ID" in r.stderr, f"vx run setuid: {r.stderr}")
        _, cs = doctor("--program", "/bin/true")
        check(cs["program"]["verdict"] == "ok", f"{cs['program']}")
    uring_ok = c["io_uring"]["verdict"] == "ok"
    rc, c = doctor("--nvme-dir", tmp)
    # io_uring forbidden by a seccomp filter, as in a locked-down container
    r = subprocess.run([helper("cli_nouring"), "true"])
    if r.returncode == 77:
        raise Skip("seccomp unavailable")
    check(r.returncode == 0, "cli_nouring works")
    rc2, c2 = doctor("--nvme-dir", tmp, wrap=[helper("cli_nouring")])
    check(c2["io_uring"]["verdict"] == "warn" and "Operation not permitted" in c2["io_uring"]["detail"]
          and "seccomp" in c2["io_uring"]["fix"] and "io_uring_disabled" in c2["io_uring"]["fix"],
          f"{c2['io_uring']}")
    check(rc2 == rc or not uring_ok, "a forbidden io_uring is a warning, not a failure")
    # an NVMe directory that cannot be used, even by root
    f = os.path.join(tmp, "file")
    open(f, "w").close()
    rc3, c3 = doctor("--nvme-dir", os.path.join(f, "sub"))
    check(rc3 == 1 and c3["nvme-dir"]["verdict"] == "fail" and "Not a directory" in c3["nvme-dir"]["detail"]
          and c3["nvme-dir"]["fix"], f"{c3['nvme-dir']}")
    rc4, c4 = doctor("--nvme-dir", f)
    check(rc4 == 1 and c4["nvme-dir"]["verdict"] == "fail", f"{c4['nvme-dir']}")
    ro = os.path.join(tmp, "ro")
    os.mkdir(ro)
    script = f'mount -t tmpfs -o ro none "{ro}" && exec "$@"'
    r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", "true"], capture_output=True)
    if r.returncode != 0:
        raise Skip("no mount namespace for a read-only directory (the other checks passed)")
    rc5, c5 = doctor("--nvme-dir", ro, wrap=["unshare", "-m", "sh", "-c", script, "sh"])
    check(rc5 == 1 and c5["nvme-dir"]["verdict"] == "fail" and "Read-only" in c5["nvme-dir"]["detail"],
          f"{c5['nvme-dir']}")
    rc6, c6 = doctor(env=preload_env({"VX_NVME_DIR": os.path.join(f, "sub")}))
    check(rc6 == 1 and c6["nvme-dir"]["verdict"] == "fail", "VX_NVME_DIR is the default")


# ---- usage errors ----

def test_usage():
    for cmd in ("run", "env", "stat", "top", "report", "doctor"):
        r = vx(cmd, "--no-such-option")
        check(r.returncode == 2 and r.stdout == "" and
              r.stderr == f"vx {cmd}: unknown option '--no-such-option'\nTry 'vx {cmd} --help'.\n",
              f"{cmd}: {r}")
        r = vx(cmd, "--help")
        check(r.returncode == 0 and r.stdout.startswith(f"usage: vx {cmd}"), f"{cmd} --help")
    for args in ([], ["nosuch"], ["run"], ["run", "--"], ["stat", "abc"], ["stat", "1", "2"],
                 ["stat", "0"], ["top", "--interval", "-1"], ["top", "--interval", "x"],
                 ["top", "--count", "0"], ["top", "extra"], ["report"], ["report", "a", "b"],
                 ["env", "extra"], ["doctor", "extra"], ["run", "--env", "NOEQUALS", "--", "true"]):
        r = vx(*args)
        told = "usage: vx" in r.stderr if not args else "Try 'vx" in r.stderr and "usage:" not in r.stderr
        check(r.returncode == 2 and told, f"{args}: {r.returncode} {r.stderr}")
    # a value an option lacks, sizes without a unit, and 0 where it read as "no limit"
    for args, said in ((["top", "--interval"], "vx top: option '--interval' needs a value"),
                       (["top", "-i"], "vx top: option '-i' needs a value"),
                       (["run", "--device-limit", "8", "--", "true"],
                        "vx run: VX_DEVICE_LIMIT='8' is not valid: a size needs a unit (8M? 8G?"),
                       (["run", "--host-limit", "0", "--", "true"],
                        "vx run: VX_HOST_LIMIT='0' is not valid: 0 is not a limit"),
                       (["bench", "nosuch"], "vx bench: unknown benchmark 'nosuch'"),
                       (["run", "--report", "--", "true"],
                        "vx run: option '--report' needs a value before '--'"),
                       (["bench", "hooks", "--bogus"], "vx bench hooks: unexpected '--bogus'"),
                       (["nosuch"], "vx: unknown command 'nosuch'\nTry 'vx help'.")):
        r = vx(*args)
        check(r.returncode == 2 and r.stderr.startswith(said), f"{args}: {r.returncode} {r.stderr}")
    for args in (["bench", "--help"], ["bench", "hooks", "--help"], ["bench", "nvme", "--help"],
                 ["replay", "--help"]):
        r = vx(*args)
        check(r.returncode == 0 and r.stdout.startswith("usage: vx ") and r.stderr == "",
              f"{args}: {r.returncode} {r.stderr}")
    r = vx("--version")
    check(r.returncode == 0 and re.fullmatch(r"vx \d+\.\d+\.\d+\n", r.stdout), r.stdout)
    r = vx("help")
    check(r.returncode == 0 and all(c in r.stdout for c in ("run", "env", "stat", "top", "report", "doctor")),
          r.stdout)


def test_man():
    man = os.path.join(SRC, "tools", "man")
    for page in ("vx.1", "libvx.7") if shutil.which("groff") else ():
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", os.path.join(man, page)],
                           capture_output=True, text=True)
        check(r.returncode == 0 and r.stderr == "", f"{page}: {r.stderr}")
    lib = open(os.path.join(man, "libvx.7")).read()
    for n, _, _ in options_def():
        check(f".B VX_{n}\n" in lib, f"VX_{n} undocumented in libvx.7")
    vx1 = open(os.path.join(man, "vx.1")).read()
    cmds = re.findall(r"^VX_COMMAND\((\w+),", open(os.path.join(SRC, "tools", "commands.def")).read(), re.M)
    for c in cmds:
        check(f".SS vx {c}\n" in vx1, f"vx {c} undocumented in vx.1")
    if not shutil.which("groff"):
        raise Skip("groff not installed: the pages were not linted (their coverage was checked)")


# ---- end to end: libvx.so publishing a real program's counters ----

def test_e2e():
    need_libvx()
    if not os.path.exists(os.path.join(BIN, "tests", "simcuda", "libcuda.so.1")):
        raise Skip("the simulated driver is not built")
    nm = subprocess.run(["nm", LIBVX], capture_output=True, text=True).stdout
    if "vx_stats_shm_publish" not in nm and "vx_stats_shm_create" not in nm:
        raise Skip("libvx.so does not publish a stats segment yet")
    tmp = tempfile.mkdtemp()
    report = os.path.join(tmp, "r.json")
    swap = os.path.join(tmp, "swap")
    os.mkdir(swap)
    # the host and NVMe limits are set: still only the device in use is listed
    p = subprocess.Popen([VX, "run", "--device-limit", "64M", "--report", report, "--host-limit", "1G",
                          "--nvme-dir", swap, "--", helper("cli_holder"), "4", "32"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=preload_env())
    line = p.stdout.readline()
    if not line:
        rc = p.wait()
        if rc == 77:
            raise Skip("cli_holder found no device")
        raise AssertionError(f"cli_holder under vx exited {rc}")
    pid = int(line.split()[1])
    try:
        c = {}
        for _ in range(50):
            r = vx("stat", str(pid), "--json")
            if r.returncode == 0:
                c = json.loads(r.stdout)["processes"][0]["devices"][0]["counters"]
                if c["alloc_native"] + c["alloc_managed"] == 4:
                    break
            time.sleep(0.1)
        check(c.get("alloc_native", 0) + c.get("alloc_managed", 0) == 4, f"allocations: {c}")
        check(c["native_bytes"] + c["managed_bytes"] == 128 << 20, f"bytes: {c}")
        check(c["native_bytes"] <= 64 << 20, f"limit respected: {c['native_bytes']}")
        devs = json.loads(vx("stat", str(pid), "--json").stdout)["processes"][0]["devices"]
        check([d["device"] for d in devs] == [0], f"devices listed: {[d['device'] for d in devs]}")
        check(devs[0]["limits"]["host"] == 1 << 30, f"{devs[0]['limits']}")
        r = vx("top", "--once", str(pid))
        check(f"PID {pid} " in r.stdout and r.stdout.count(" gpu") == 1, f"vx top: one device: {r.stdout}")
        if c["host_held_bytes"]:  # what VX_HOST_LIMIT limits, as vx stat and the report have it
            m = re.search(r"\n\s+host\s+\[[#.]+\]\s+(\S+)/1\.0G", r.stdout)
            check(m and m.group(1) != "0", f"vx top's host line, host_held_bytes {c['host_held_bytes']}: {r.stdout}")
        check_width(r.stdout)
    finally:
        p.stdin.close()
        rc = p.wait(timeout=30)
    check(rc == 0, f"cli_holder exit {rc}")
    check(not os.path.exists(f"/dev/shm/vx-{os.geteuid()}-{pid}"), "segment removed at exit")
    if os.path.exists(report):
        r = vx("report", report, "--svg", os.path.join(tmp, "r.svg"))
        check(r.returncode == 0, f"report of a real run: {r.stderr}")
        xml.dom.minidom.parse(os.path.join(tmp, "r.svg"))


def test_stat_demand():
    """#14: a program whose pages fault on the simulator: vx stat and vx top
    show the driver's own migrations, measured and nonzero, beside vx's."""
    need_libvx()
    if not os.path.exists(helper("cli_faulter")):
        raise Skip("cli_faulter is not built (no tests/kit)")
    # 6 x 16 MiB over a 32 MiB device, 8 MiB of it vx's budget: the rest is
    # managed and faults in (and is evicted) at every round of kernels.
    # Under demand paging: predict would read buffers that come back once a
    # round in host memory (tiers/exec.c's pins), and nothing would fault
    env = preload_env({"SIMCUDA_VRAM": "32M", "VX_RESERVE": "0", "VX_MOVABLE": "0",
                       "VX_POLICY": "demand"})
    p = subprocess.Popen([VX, "run", "--device-limit", "8M", "--", helper("cli_faulter"), "6", "16"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline()
    check(line.startswith("ready "), f"cli_faulter under vx: {line!r}, exit {p.poll()}")
    pid = int(line.split()[1])
    try:
        dev = {}
        for _ in range(100):  # the publisher refreshes them every 200 ms
            r = vx("stat", str(pid), "--json")
            check(r.returncode == 0, f"vx stat: {r.stderr}")
            dev = json.loads(r.stdout)["processes"][0]["devices"][0]
            c = dev["counters"]
            if c["demand_measured"] == 1 and c["demand_up_bytes"] > 0 and c["demand_down_bytes"] > 0:
                break
            time.sleep(0.1)
        c = dev["counters"]
        check("demand_migrations" not in dev and c["demand_measured"] == 1, f"not measured: {dev}")
        check(c["demand_up_bytes"] > 0 and c["demand_down_bytes"] > 0, f"no demand migrations: {c}")
        r = vx("stat", str(pid))
        m = re.search(r"^  device 0 demand migrations, average since start: up (\S+)/s down (\S+)/s "
                      r"\(the driver's own\)$", r.stdout, re.M)
        check(m and m.group(1) != "0", f"vx stat's demand line: {r.stdout}")
        check(re.search(r"^  device 0 traffic, average since start: up \S+/s down \S+/s \(vx's own\)$",
                        r.stdout, re.M), f"vx stat's traffic line: {r.stdout}")
        r = vx("stat", str(pid), "--prometheus")
        m = re.search(r'^vx_demand_up_bytes_total\{pid="%d",device="0",[^}]*\} (\d+)$' % pid, r.stdout, re.M)
        check(m and int(m.group(1)) > 0, f"prometheus demand: {r.stdout[-600:]}")
        r = vx("top", "--once", str(pid))
        m = re.search(r"^\s+demand up (\S+)/s +down (\S+)/s +\(the driver's own\)$", r.stdout, re.M)
        check(m and m.group(1) != "0", f"vx top's demand line: {r.stdout}")
        check_width(r.stdout)
    finally:
        p.stdin.close()
        rc = p.wait(timeout=60)
    check(rc == 0, f"cli_faulter exit {rc}")


# ---- install and package ----

def test_install():
    if not os.path.exists(LIBVX):
        raise Skip("build/libvx.so is not built")
    prefix = tempfile.mkdtemp()
    r = subprocess.run(["cmake", "--install", BIN, "--prefix", prefix], capture_output=True, text=True)
    check(r.returncode == 0, r.stderr)
    vxi = os.path.join(prefix, "bin", "vx")
    libs = glob.glob(os.path.join(prefix, "lib*", "libvx.so")) + glob.glob(os.path.join(prefix, "lib", "*", "libvx.so"))
    check(os.access(vxi, os.X_OK) and len(libs) == 1, f"installed: {vxi} {libs}")
    for page in ("share/man/man1/vx.1.gz", "share/man/man7/libvx.7.gz", "share/doc/vx/copyright",
                 "share/doc/vx/changelog.gz"):
        check(os.path.exists(os.path.join(prefix, page)), page)
    pcs = glob.glob(os.path.join(prefix, "lib*", "pkgconfig", "vx.pc")) + glob.glob(
        os.path.join(prefix, "lib", "*", "pkgconfig", "vx.pc"))
    check(len(pcs) == 1, "vx.pc")
    r = subprocess.run(["pkg-config", "--variable=preload", "vx"], capture_output=True, text=True,
                       env=dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0])))
    check(os.path.realpath(r.stdout.strip()) == os.path.realpath(libs[0]), f"pc preload {r.stdout}")
    # the installed vx preloads the installed libvx.so, not the build tree's
    r = subprocess.run([vxi, "run", "--", helper("cli_static"), "env"], capture_output=True,
                       text=True, env=preload_env())
    got = env_lines(r.stdout).get("LD_PRELOAD", "")
    check(r.returncode == 0 and got.endswith(os.path.realpath(libs[0])), f"installed vx run: {got}")
    need_libvx()
    r = subprocess.run([vxi, "run", "--", "sh", "-c", 'echo "$LD_PRELOAD"'], capture_output=True,
                       text=True, env=preload_env())
    check(r.returncode == 0 and r.stdout.strip().endswith(os.path.realpath(libs[0])), f"{r}")
    r = subprocess.run([vxi, "run", "--", "sh", "-c", "exit 3"], env=preload_env())
    check(r.returncode == 3, "installed vx run propagates the status")
    sim_dir = os.path.join(BIN, "tests", "simcuda")
    if not SAN:  # the benchmark preloads libvx.so into its children without a sanitizer runtime
        # from the prefix: its own libvx.so, the driver the linker finds, never the simulator unasked
        env = dict(os.environ)
        env.pop("LD_LIBRARY_PATH", None)
        r = subprocess.run([vxi, "bench", "hooks", "--iters", "1000"], capture_output=True, text=True,
                           env=env, timeout=120)
        check(r.returncode == 1 and "vx bench hooks: no CUDA driver (" in r.stderr, f"no driver: {r}")
        r = subprocess.run([vxi, "bench", "hooks", "--iters", "1000", "--sim"], capture_output=True,
                           text=True, env=env, timeout=120)
        check(r.returncode == 1 and "--sim needs the simulated driver of a build tree" in r.stderr,
              f"--sim from a prefix: {r}")
        if os.path.exists(os.path.join(sim_dir, "libcuda.so.1")):
            env["LD_LIBRARY_PATH"] = sim_dir
            r = subprocess.run([vxi, "bench", "hooks", "--iters", "1000"], capture_output=True,
                               text=True, env=env, timeout=120)
            check(r.returncode == 0 and '"simulated":true' in r.stdout and
                  '"driver":"' + os.path.realpath(os.path.join(sim_dir, "libcuda.so.1")) in r.stdout,
                  f"installed vx bench hooks: {r}")
    if os.path.exists(os.path.join(sim_dir, "libcuda.so.1")):
        p = subprocess.run([vxi, "run", "--", helper("cli_holder"), "2", "8"], input="",
                           capture_output=True, text=True, env=preload_env(), timeout=60)
        check(p.returncode == 77 or (p.returncode == 0 and "ready" in p.stdout),
              f"cli_holder under the installed vx: {p.returncode} {p.stderr}")


def test_deb():
    if not os.path.exists(LIBVX):
        raise Skip("build/libvx.so is not built")
    if not shutil.which("dpkg-deb"):
        raise Skip("dpkg-deb not installed")
    out = tempfile.mkdtemp()
    r = subprocess.run(["cpack", "-G", "DEB", "--config", os.path.join(BIN, "CPackConfig.cmake"), "-B", out],
                       capture_output=True, text=True, cwd=BIN, timeout=120)
    check(r.returncode == 0, r.stdout + r.stderr)
    debs = glob.glob(os.path.join(out, "*.deb"))
    check(len(debs) == 1, f"{debs}")
    files = subprocess.run(["dpkg-deb", "-c", debs[0]], capture_output=True, text=True).stdout
    names = [l.split()[-1] for l in files.splitlines()]
    for want in ("./usr/bin/vx", "./usr/share/man/man1/vx.1.gz", "./usr/share/man/man7/libvx.7.gz",
                 "./usr/share/doc/vx/copyright", "./usr/share/doc/vx/changelog.gz"):
        check(want in names, f"{want} not in {names}")
    check(any(re.fullmatch(r"\./usr/lib/(.*/)?libvx\.so", n) for n in names), "libvx.so")
    check(any(re.fullmatch(r"\./usr/lib/(.*/)?pkgconfig/vx\.pc", n) for n in names), "vx.pc")
    check(not any("/tests/" in n or n.endswith(".a") for n in names), f"test files packaged: {names}")
    info = subprocess.run(["dpkg-deb", "-f", debs[0], "Package", "Depends", "Maintainer"],
                          capture_output=True, text=True).stdout
    check("Package: vx" in info and "liburing2" in info and "libunwind8" in info
          and "libc6" in info and "Maintainer: " in info, info)
    check(glob.glob(os.path.join(out, "vx-dbgsym_*.ddeb")), "no debug-symbol package beside it")
    # lintian (scripts/deps.sh installs it): no error on the package itself
    if not shutil.which("lintian"):
        raise Skip("lintian not installed (apt-get install lintian)")
    r = subprocess.run(["lintian", "--tag-display-limit", "0", debs[0]], capture_output=True, text=True,
                       timeout=300)
    errors = [l for l in r.stdout.splitlines() if l.startswith("E: ")]
    check(not errors, "lintian errors:\n" + "\n".join(errors))
    pc = subprocess.run(["dpkg-deb", "--fsys-tarfile", debs[0]], capture_output=True).stdout
    import io, tarfile
    with tarfile.open(fileobj=io.BytesIO(pc)) as t:
        text = t.extractfile([m for m in t.getmembers() if m.name.endswith("vx.pc")][0]).read().decode()
    check("//" not in text.replace("://", "") and "\nLibs:" not in text, f"vx.pc:\n{text}")


def main():
    name = sys.argv[1]
    try:
        globals()["test_" + name]()
    except Skip as e:
        print(f"SKIP cli_{name}: {e}", file=sys.stderr)
        return 77
    except AssertionError as e:
        print(f"FAIL cli_{name}: {e}", file=sys.stderr)
        return 1
    print(f"PASS cli_{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
