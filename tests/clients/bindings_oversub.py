"""bindings_oversub.py VRAM_BYTES: NVIDIA's cuda-bindings (cuda.bindings.driver),
unmodified, allocates 4x the device's memory with cuMemAlloc, fills every
buffer (cuMemsetD32, then cuMemcpyHtoD over part of each), copies all back and
verifies it.  Exit 0 when every byte is right; 2 with "OUT_OF_MEMORY" when an
allocation fails with CUDA_ERROR_OUT_OF_MEMORY (what a plain run must do);
1 on any other error or a wrong byte."""
import struct
import sys

from cuda.bindings import driver as cu


def ok(res, what):
    err = res[0] if isinstance(res, tuple) else res
    if err != cu.CUresult.CUDA_SUCCESS:
        print(f"bindings_oversub: {what}: {err.name}")
        sys.exit(2 if err == cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY else 1)
    return res[1] if isinstance(res, tuple) and len(res) == 2 else res


def main():
    vram = int(sys.argv[1])
    chunk = vram // 8
    count = 32  # 4x the device
    ok(cu.cuInit(0), "cuInit")
    dev = ok(cu.cuDeviceGet(0), "cuDeviceGet")
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    ok(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    res = cu.cuMemGetInfo()
    ok(res[0], "cuMemGetInfo")
    free, total = res[1], res[2]
    print(f"bindings_oversub: cuMemGetInfo free={free} total={total}; "
          f"allocating {count} x {chunk} = {count * chunk / vram:.2f}x of {vram}")
    ptrs = []
    for i in range(count):
        ptrs.append(ok(cu.cuMemAlloc(chunk), f"cuMemAlloc #{i} of {chunk} bytes"))
    head = 1 << 16  # each buffer starts with distinct host-written bytes
    for i, p in enumerate(ptrs):
        ok(cu.cuMemsetD32(p, 0x5A000000 | i, chunk // 4), f"cuMemsetD32 #{i}")
        data = bytes((i * 7 + k) & 0xFF for k in range(256)) * (head // 256)
        ok(cu.cuMemcpyHtoD(p, data, head), f"cuMemcpyHtoD #{i}")
    ok(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    buf = bytearray(chunk)
    for i, p in enumerate(ptrs):
        ok(cu.cuMemcpyDtoH(buf, p, chunk), f"cuMemcpyDtoH #{i}")
        want_head = bytes((i * 7 + k) & 0xFF for k in range(256)) * (head // 256)
        want_tail = struct.pack("<I", 0x5A000000 | i) * ((chunk - head) // 4)
        if buf[:head] != want_head or buf[head:] != want_tail:
            bad = next(k for k in range(chunk)
                       if buf[k] != (want_head + want_tail)[k])
            print(f"bindings_oversub: buffer #{i} wrong at byte {bad}")
            sys.exit(1)
    for i, p in enumerate(ptrs):
        ok(cu.cuMemFree(p), f"cuMemFree #{i}")
    ok(cu.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    print(f"bindings_oversub: OK: {count * chunk} bytes ({count * chunk / vram:.2f}x the device) "
          f"allocated, written and verified")


main()
