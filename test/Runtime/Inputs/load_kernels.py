"""Loads fa-kernel metadata files through libFARuntime.so (ctypes) and
prints, per file, the status name and fa_last_error(), then "done" (so a
test sees that the process did not abort).

usage: load_kernels.py LIB DEVICE(cpu|cuda) JSON...
"""
import ctypes
import os
import sys


def main():
    lib = ctypes.CDLL(sys.argv[1])
    device = {"cpu": 0, "cuda": 1}[sys.argv[2]]
    lib.fa_kernel_load.argtypes = [ctypes.c_char_p, ctypes.c_int,
                                   ctypes.POINTER(ctypes.c_void_p)]
    lib.fa_kernel_load.restype = ctypes.c_int
    lib.fa_status_name.argtypes = [ctypes.c_int]
    lib.fa_status_name.restype = ctypes.c_char_p
    lib.fa_last_error.restype = ctypes.c_char_p
    lib.fa_kernel_destroy.argtypes = [ctypes.c_void_p]
    for path in sys.argv[3:]:
        kernel = ctypes.c_void_p()
        status = lib.fa_kernel_load(path.encode(), device,
                                    ctypes.byref(kernel))
        print("%s: %s: %s" % (os.path.basename(path),
                              lib.fa_status_name(status).decode(),
                              lib.fa_last_error().decode()))
        if kernel:
            lib.fa_kernel_destroy(kernel)
    print("done")


if __name__ == "__main__":
    main()
