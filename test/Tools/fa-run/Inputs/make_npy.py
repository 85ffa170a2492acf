# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes small .npy files for fa-run's tests.

    make_npy.py DIR NAME=DTYPE:SHAPE[:FLAGS] ...

DTYPE is anything numpy.dtype accepts (float32, float16, float64, bool, int32,
'>f4', ...). SHAPE is a comma-separated list of dims, empty for a 0-d array.
FLAGS: 'F' saves a Fortran-order array, 'Z' fills with zeros (the default is
seeded random data, positive integers for integer types).
"""

import os
import sys

import numpy as np


def main(argv):
    out_dir = argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(1234)
    for spec in argv[2:]:
        name, rest = spec.split("=", 1)
        parts = rest.split(":")
        dtype = np.dtype(parts[0])
        dims = parts[1].split(",") if len(parts) > 1 else []
        shape = tuple(int(d) for d in dims if d)
        flags = parts[2] if len(parts) > 2 else ""
        if "Z" in flags:
            a = np.zeros(shape, dtype)
        elif dtype.kind == "b":
            a = rng.random(shape) < 0.5
        elif dtype.kind in "iu":
            a = rng.integers(1, 8, shape).astype(dtype)
        else:
            a = rng.standard_normal(shape).astype(dtype)
        if "F" in flags:
            a = np.asfortranarray(a)
        np.save(os.path.join(out_dir, name), a)


if __name__ == "__main__":
    main(sys.argv)
