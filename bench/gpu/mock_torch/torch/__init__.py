# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""A numpy-backed stand-in for the few torch calls bench/gpu/check_and_time.py
makes, so its torch code paths (device buffers, the float32 reference, the
SDPA check, CUDA-event timing, the report) run on machines without torch:

    PYTHONPATH=bench/gpu/mock_torch FA_CUDA_DRIVER=<fake libcuda> \
        python3 bench/gpu/check_and_time.py --device cuda ...

Only for smoke tests (test/Runtime/bench-gpu-dry-run.test): "device" memory
is host memory, nothing is timed (every event pair reads 2 ms), and `full`
ignores its fill value so that a fake driver's untouched output passes the
SDPA check and the timing code runs. Never on the PYTHONPATH of a real run.
"""

import numpy as np
__version__ = "0.0-mock"
calls = {}
def _count(name):
    calls[name] = calls.get(name, 0) + 1

class dtype:
    def __init__(self, name, np_dtype): self.name, self.np = name, np_dtype
    def __repr__(self): return "torch." + self.name
float32 = dtype("float32", np.float32); float16 = dtype("float16", np.float16)
bfloat16 = dtype("bfloat16", np.float32); int16 = dtype("int16", np.int16)
int32 = dtype("int32", np.int32); int64 = dtype("int64", np.int64)
bool = dtype("bool", np.bool_); uint8 = dtype("uint8", np.uint8)
_NP = {np.dtype(np.float32): float32, np.dtype(np.float16): float16,
       np.dtype(np.int16): int16, np.dtype(np.int32): int32,
       np.dtype(np.int64): int64, np.dtype(np.bool_): bool,
       np.dtype(np.uint8): uint8}

class Tensor:
    def __init__(self, a, dt=None, bits=None):
        self.a = np.ascontiguousarray(a); self.dtype = dt or _NP[self.a.dtype]
        self._buf = bits if bits is not None else self.a
    shape = property(lambda self: self.a.shape)
    device = "cuda"
    def view(self, dt):
        assert isinstance(dt, dtype)
        if dt is bfloat16:
            assert self.dtype is int16
            bits = self.a.view(np.uint16)
            return Tensor((bits.astype(np.uint32) << 16).view(np.float32), bfloat16, bits)
        raise NotImplementedError(dt)
    def to(self, device): assert device == "cuda"; _count("to"); return self
    def contiguous(self): return self
    def element_size(self):
        return 2 if self.dtype is bfloat16 else np.dtype(self.dtype.np).itemsize
    def data_ptr(self): return self._buf.ctypes.data
    def float(self): return Tensor(self.a.astype(np.float32))
    def long(self): return Tensor(self.a.astype(np.int64))
    def cpu(self): return self
    def numpy(self): return self.a
    def transpose(self, i, j): return Tensor(np.swapaxes(self.a, i, j))
    def repeat_interleave(self, n, dim): return Tensor(np.repeat(self.a, n, axis=dim))
    def masked_fill(self, mask, value):
        return Tensor(np.where(mask.a, np.float32(value), self.a).astype(self.a.dtype))
    def expand(self, *shape): return Tensor(np.broadcast_to(self.a, shape))
    def sum(self): return Tensor(np.asarray(self.a.sum()))
    def abs(self): return Tensor(np.abs(self.a))
    def max(self): return Tensor(np.asarray(self.a.max()))
    def item(self): return self.a.item()
    def __getitem__(self, idx):
        return Tensor(self.a[idx.a if isinstance(idx, Tensor) else idx], self.dtype)
    def reshape(self, *shape): return Tensor(self.a.reshape(shape), self.dtype)
    def permute(self, *dims): return Tensor(self.a.transpose(dims), self.dtype)
    def __invert__(self): return Tensor(~self.a)
    def __and__(self, o): return Tensor(self.a & o.a)
    def __lt__(self, o): return Tensor(self.a < (o.a if isinstance(o, Tensor) else o))
    def __le__(self, o): return Tensor(self.a <= (o.a if isinstance(o, Tensor) else o))
    def __add__(self, o): return Tensor(self.a + (o.a if isinstance(o, Tensor) else o))
    def __sub__(self, o): return Tensor(self.a - o.a)
    def __mul__(self, o): return Tensor(self.a * o)
    def __matmul__(self, o): return Tensor(np.matmul(self.a, o.a))
    @property
    def T(self): return Tensor(self.a.T)
    def norm(self): return Tensor(np.asarray(np.linalg.norm(self.a)))
    def tril(self): return Tensor(np.tril(self.a))
    def __setitem__(self, idx, value): self.a[idx] = value.a
    # Autograd, as far as the backward timing goes: grad returns zeros.
    def detach(self): return self
    def clone(self): return Tensor(self.a.copy(), self.dtype)
    def requires_grad_(self, flag=True): return self

def from_numpy(a): return Tensor(a)
def zeros(*shape, device=None): return Tensor(np.zeros(shape, np.float32))
def ones(*shape, dtype=None, device=None): return Tensor(np.ones(shape, dtype.np))
def arange(n, device=None): return Tensor(np.arange(n))
def matmul(a, b): return Tensor(np.matmul(a.a, b.a))
def logsumexp(s, dim):
    with np.errstate(all="ignore"):
        m = s.a.max(axis=dim, keepdims=True); m = np.where(np.isfinite(m), m, 0)
        return Tensor((np.log(np.exp(s.a - m).sum(axis=dim, keepdims=True)) + m).squeeze(dim))
def softmax(s, dim):
    with np.errstate(all="ignore"):
        e = np.exp(s.a - s.a.max(axis=dim, keepdims=True))
        return Tensor(e / e.sum(axis=dim, keepdims=True))
def nan_to_num(t, nan): return Tensor(np.nan_to_num(t.a, nan=nan))
def isnan(t): return Tensor(np.isnan(t.a))
class Generator:
    def __init__(self, device): assert device == "cuda"
    def manual_seed(self, s): self.rng = np.random.default_rng(s); return self
def randn(*shape, device=None, dtype=None, generator=None):
    assert device == "cuda" and isinstance(generator, Generator)
    return Tensor(generator.rng.standard_normal(shape).astype(np.float32), dtype)
def empty(*shape, device=None, dtype=None):
    assert device == "cuda"; _count("empty")
    # 256-byte aligned, like torch's caching allocator.
    n = int(np.prod(shape))
    raw = np.zeros(n + 256, dtype.np)
    skip = (-raw.ctypes.data) % 256
    return Tensor(raw[skip:skip + n].reshape(shape))
def full_like(t, value):
    _count("full_like")
    # Zeros, as full's: the fake kernel's untouched gradients then "match"
    # grad's zeros and the backward timing runs.
    return Tensor(np.zeros(t.a.shape, t.a.dtype), t.dtype)
class no_grad:
    def __enter__(self): return self
    def __exit__(self, *args): return False
class autograd:
    @staticmethod
    def grad(out, inputs, grad_output, retain_graph=False):
        _count("grad")
        return tuple(Tensor(np.zeros(x.a.shape, np.float32)) for x in inputs)
def full(shape, value, device=None, dtype=None):
    _count("full")
    # Not NaN, so the fake kernel's untouched output "matches" SDPA's zeros
    # and the timing code runs.
    return Tensor(np.zeros(shape, np.float32), dtype)

class _Stream: cuda_stream = 0
class _Event:
    def __init__(self, enable_timing): assert enable_timing
    def record(self): _count("record")
    def synchronize(self): pass
    def elapsed_time(self, other): return 2.0
class cuda:
    Event = _Event
    @staticmethod
    def is_available(): return True
    @staticmethod
    def init(): pass
    @staticmethod
    def synchronize(): _count("synchronize")
    @staticmethod
    def current_stream(): return _Stream()
    @staticmethod
    def get_device_name(): return "Mock H200"
class version: cuda = "13.0"
class _Flag:
    allow_tf32 = True
class backends:
    class cuda: matmul = _Flag()
    cudnn = _Flag()
class nn:
    class functional:
        @staticmethod
        def scaled_dot_product_attention(q, k, v, is_causal=False, scale=None, **kw):
            _count("sdpa"); assert scale is not None
            return Tensor(np.zeros(q.shape[:3] + (v.shape[3],), np.float32), q.dtype)
