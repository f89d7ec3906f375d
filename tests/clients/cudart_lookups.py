"""cudart_lookups.py LIBCUDART: loads a real libcudart with ctypes and makes
it start (cudaGetDeviceCount, cudaFree(0)), so that its cuGetProcAddress_v2
lookups reach the driver (logged by the simulator under SIMCUDA_LOG=procaddr).
Prints the runtime's answers; their errors are expected over the simulator."""
import ctypes
import sys

rt = ctypes.CDLL(sys.argv[1])
n = ctypes.c_int(-1)
print("cudaGetDeviceCount:", rt.cudaGetDeviceCount(ctypes.byref(n)), n.value)
print("cudaFree(0):", rt.cudaFree(None))
