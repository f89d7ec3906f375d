"""nvml_budget.py EXPECT_TOTAL ALLOC: NVIDIA's nvidia-ml-py (pynvml),
unmodified: nvmlInit (nvmlInitWithFlags), versions, device count and name,
memory info (v1 and v2) before and after this process allocates ALLOC bytes
through cuda-bindings, and the compute process list.  The total must be
EXPECT_TOTAL (the device, or the VX_DEVICE_LIMIT budget under vx) and used
must grow by ALLOC; the process list must name this process with at least
ALLOC bytes.  Exit 0, or 1 saying what differed."""
import os
import sys

import pynvml as nv
from cuda.bindings import driver as cu

fails = []


def check(cond, what):
    print(f"nvml_budget: {'ok' if cond else 'FAIL'}: {what}")
    if not cond:
        fails.append(what)


def memory(h):
    m1 = nv.nvmlDeviceGetMemoryInfo(h)
    m2 = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
    check(m1.total == m2.total and m1.free == m2.free,
          f"v1 and v2 agree: total {m1.total}/{m2.total} free {m1.free}/{m2.free}")
    check(m1.used + m1.free == m1.total, f"used {m1.used} + free {m1.free} == total {m1.total}")
    return m1


def main():
    want_total, alloc = int(sys.argv[1]), int(sys.argv[2])
    nv.nvmlInit()
    print(f"nvml_budget: driver {nv.nvmlSystemGetDriverVersion()}, "
          f"CUDA {nv.nvmlSystemGetCudaDriverVersion()}, NVML {nv.nvmlSystemGetNVMLVersion()}")
    check(nv.nvmlDeviceGetCount() == 1, "one device")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    print(f"nvml_budget: {nv.nvmlDeviceGetName(h)} {nv.nvmlDeviceGetUUID(h)}")
    check(nv.nvmlDeviceGetComputeRunningProcesses(h) == [], "no process before a context")
    cu.cuInit(0)
    _, dev = cu.cuDeviceGet(0)
    _, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    cu.cuCtxSetCurrent(ctx)
    before = memory(h)
    check(before.total == want_total, f"total {before.total} == {want_total}")
    err, p = cu.cuMemAlloc(alloc)
    check(err == cu.CUresult.CUDA_SUCCESS, f"cuMemAlloc({alloc}): {err.name}")
    after = memory(h)
    check(after.total == want_total, f"total {after.total} == {want_total} after the allocation")
    check(after.used - before.used == alloc, f"used grew by {after.used - before.used} == {alloc}")
    procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
    mine = [q for q in procs if q.pid == os.getpid()]
    check(len(mine) == 1, f"this process ({os.getpid()}) listed: {[q.pid for q in procs]}")
    if mine:
        check(mine[0].usedGpuMemory >= alloc, f"its usedGpuMemory {mine[0].usedGpuMemory} >= {alloc}")
    check(nv.nvmlDeviceGetGraphicsRunningProcesses(h) == [], "no graphics process")
    u = nv.nvmlDeviceGetUtilizationRates(h)
    check(0 <= u.gpu <= 100 and 0 <= u.memory <= 100, f"utilization gpu={u.gpu}% memory={u.memory}%")
    cu.cuMemFree(p)
    nv.nvmlShutdown()
    if fails:
        print(f"nvml_budget: {len(fails)} check(s) failed")
        sys.exit(1)
    print("nvml_budget: OK")


main()
