# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""ctypes binding of FARuntime's C API (include/fa/Runtime/FARuntime.h).

Loads libFARuntime.so (built standalone from lib/Runtime, no LLVM) and wraps
the calls bench/gpu/check_and_time.py needs. Every failing call raises
FARuntimeError carrying the status name and fa_last_error()'s message.

    rt = FARuntime("/tmp/fa-rt/libFARuntime.so")
    kernel = rt.load("artifacts/bench_bf16_d128_h16_none_sm_90.json", "cuda")
    q = rt.tensor(q_ptr, "bf16", (B, H, N, D))   # a device pointer (int)
    ...
    rt.attention(kernel, q, k, v, o=o, lse=None, stream=torch_stream_handle)
"""

import ctypes

FA_MAX_RANK = 4

STATUS_NAMES = {
    0: "FA_SUCCESS",
    1: "FA_ERROR_NO_DRIVER",
    2: "FA_ERROR_NO_DEVICE",
    3: "FA_ERROR_UNSUPPORTED_ARCH",
    4: "FA_ERROR_PTX_TOO_NEW",
    5: "FA_ERROR_INVALID_ARTIFACT",
    6: "FA_ERROR_INVALID_ARGUMENT",
    7: "FA_ERROR_IO",
    8: "FA_ERROR_CUDA",
    9: "FA_ERROR_LAUNCH",
}

DEVICES = {"cpu": 0, "cuda": 1}
DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "i32": 3, "i8": 4, "bool": 5}
CAUSAL_NAMES = {0: "none", 1: "top_left", 2: "bottom_right"}


class FATensor(ctypes.Structure):
    """fa_tensor: a view of device (or host) memory."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("sizes", ctypes.c_int64 * FA_MAX_RANK),
        ("strides", ctypes.c_int64 * FA_MAX_RANK),
    ]


class FAKernelInfo(ctypes.Structure):
    """fa_kernel_info (enums are C ints)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("symbol", ctypes.c_char_p),
        ("target", ctypes.c_char_p),
        ("op", ctypes.c_int),
        ("device", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("head_dim", ctypes.c_int32),
        ("value_head_dim", ctypes.c_int32),
        ("heads", ctypes.c_int32),
        ("kv_heads", ctypes.c_int32),
        ("causal", ctypes.c_int),
        ("mask", ctypes.c_int),
        ("has_kv_lens", ctypes.c_int32),
        ("has_lse", ctypes.c_int32),
        ("scale", ctypes.c_float),
        ("block_q", ctypes.c_int32),
        ("block_kv", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("dimension", ctypes.c_int32),
    ]


class FAAttentionModifiers(ctypes.Structure):
    """fa_attention_modifiers."""

    _fields_ = [
        ("window_left", ctypes.c_int64),
        ("window_right", ctypes.c_int64),
        ("softcap", ctypes.c_double),
        ("chunk", ctypes.c_int64),
        ("alibi", ctypes.c_int32),
        ("has_segments", ctypes.c_int32),
    ]


class FAAttentionExtras(ctypes.Structure):
    """fa_attention_extras: the modifier operands."""

    _fields_ = [
        ("alibi", ctypes.c_void_p),
        ("q_segments", ctypes.c_void_p),
        ("k_segments", ctypes.c_void_p),
    ]


ALIBI_KINDS = {0: None, 1: "heads", 2: "batch_heads"}


class FASplitKv(ctypes.Structure):
    _fields_ = [("num_splits", ctypes.c_int64),
                ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_size_t)]


class FARuntimeError(RuntimeError):
    def __init__(self, call, status, message):
        self.call = call
        self.status = STATUS_NAMES.get(status, f"status {status}")
        self.message = message
        super().__init__(f"{call}: {self.status}: {message}")


class Kernel:
    """A loaded kernel (fa_kernel *) and its info."""

    def __init__(self, runtime, handle, path):
        self._runtime = runtime
        self.handle = handle
        self.path = path
        info = FAKernelInfo()
        runtime._check("fa_kernel_get_info",
                       runtime.lib.fa_kernel_get_info(handle, ctypes.byref(info)))
        self.name = info.name.decode()
        self.target = info.target.decode()
        # FA_OP_ATTENTION, FA_OP_SOFTMAX, FA_OP_ATTENTION_BACKWARD.
        self.op = {0: "attention", 1: "softmax",
                   2: "attention_backward"}.get(info.op, str(info.op))
        self.head_dim = info.head_dim
        self.value_head_dim = info.value_head_dim
        self.heads = info.heads
        self.kv_heads = info.kv_heads
        self.causal = CAUSAL_NAMES.get(info.causal, str(info.causal))
        self.has_kv_lens = bool(info.has_kv_lens)
        self.has_lse = bool(info.has_lse)
        self.scale = info.scale
        self.block_q = info.block_q
        self.block_kv = info.block_kv
        mods = FAAttentionModifiers()
        runtime._check("fa_kernel_get_modifiers",
                       runtime.lib.fa_kernel_get_modifiers(
                           handle, ctypes.byref(mods)))
        # (left, right) or None; -1 is an unbounded side.
        self.window = ((mods.window_left, mods.window_right)
                       if mods.window_left >= 0 or mods.window_right >= 0
                       else None)
        self.softcap = mods.softcap if mods.softcap > 0 else None
        self.chunk = mods.chunk if mods.chunk > 0 else None
        self.alibi = ALIBI_KINDS.get(mods.alibi, str(mods.alibi))
        self.has_segments = bool(mods.has_segments)
        page_size = ctypes.c_int64(0)
        varlen = ctypes.c_int32(0)
        runtime._check("fa_kernel_get_serving",
                       runtime.lib.fa_kernel_get_serving(
                           handle, ctypes.byref(page_size),
                           ctypes.byref(varlen)))
        # The serving forms: a paged K/V cache of page_size-row pages, or
        # the token-major variable-length form.
        self.page_size = page_size.value
        self.varlen = bool(varlen.value)
        split = ctypes.c_int32(0)
        runtime._check("fa_kernel_get_split_kv",
                       runtime.lib.fa_kernel_get_split_kv(
                           handle, ctypes.byref(split)))
        # Split-KV: launches take a part count and a workspace.
        self.split_kv = bool(split.value)

    @property
    def has_modifiers(self):
        return bool(self.window or self.softcap or self.chunk or self.alibi or
                    self.has_segments)

    def close(self):
        if self.handle:
            self._runtime.lib.fa_kernel_destroy(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class FARuntime:
    """libFARuntime.so through ctypes."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        lib = self.lib
        c_status = ctypes.c_int
        p_tensor = ctypes.POINTER(FATensor)
        lib.fa_status_name.restype = ctypes.c_char_p
        lib.fa_status_name.argtypes = [c_status]
        lib.fa_last_error.restype = ctypes.c_char_p
        lib.fa_last_error.argtypes = []
        lib.fa_tensor_make.restype = FATensor
        lib.fa_tensor_make.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                       ctypes.c_int32,
                                       ctypes.POINTER(ctypes.c_int64)]
        lib.fa_cuda_available.restype = c_status
        lib.fa_cuda_available.argtypes = [ctypes.POINTER(ctypes.c_int)]
        lib.fa_cuda_device_chip.restype = c_status
        lib.fa_cuda_device_chip.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.fa_kernel_load.restype = c_status
        lib.fa_kernel_load.argtypes = [ctypes.c_char_p, ctypes.c_int,
                                       ctypes.POINTER(ctypes.c_void_p)]
        lib.fa_kernel_destroy.restype = None
        lib.fa_kernel_destroy.argtypes = [ctypes.c_void_p]
        lib.fa_kernel_get_info.restype = c_status
        lib.fa_kernel_get_info.argtypes = [ctypes.c_void_p,
                                           ctypes.POINTER(FAKernelInfo)]
        lib.fa_attention_launch.restype = c_status
        lib.fa_attention_launch.argtypes = [ctypes.c_void_p] + [p_tensor] * 7 + [
            ctypes.c_void_p]
        lib.fa_attention_launch_ex.restype = c_status
        lib.fa_attention_launch_ex.argtypes = (
            [ctypes.c_void_p] + [p_tensor] * 5 +
            [ctypes.POINTER(FAAttentionExtras)] + [p_tensor] * 2 +
            [ctypes.c_void_p])
        lib.fa_attention_backward_launch.restype = c_status
        lib.fa_attention_backward_launch.argtypes = (
            [ctypes.c_void_p] + [p_tensor] * 8 +
            [ctypes.POINTER(FAAttentionExtras)] + [p_tensor] * 3 +
            [ctypes.c_void_p])
        lib.fa_kernel_get_modifiers.restype = c_status
        lib.fa_kernel_get_modifiers.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(FAAttentionModifiers)]
        lib.fa_kernel_get_serving.restype = c_status
        lib.fa_kernel_get_serving.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64),
            ctypes.POINTER(ctypes.c_int32)]
        lib.fa_attention_launch_paged.restype = c_status
        lib.fa_attention_launch_paged.argtypes = (
            [ctypes.c_void_p] + [p_tensor] * 6 +
            [ctypes.POINTER(FAAttentionExtras)] + [p_tensor] * 2 +
            [ctypes.c_void_p])
        lib.fa_attention_launch_varlen.restype = c_status
        lib.fa_attention_launch_varlen.argtypes = (
            [ctypes.c_void_p] + [p_tensor] * 5 +
            [ctypes.POINTER(FAAttentionExtras)] + [p_tensor] * 2 +
            [ctypes.c_void_p])
        lib.fa_kernel_get_split_kv.restype = c_status
        lib.fa_kernel_get_split_kv.argtypes = [ctypes.c_void_p,
                                               ctypes.POINTER(ctypes.c_int32)]
        lib.fa_attention_num_splits.restype = c_status
        lib.fa_attention_num_splits.argtypes = [
            ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.POINTER(ctypes.c_int64)]
        lib.fa_attention_workspace_size.restype = c_status
        lib.fa_attention_workspace_size.argtypes = [
            ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.POINTER(ctypes.c_size_t)]
        lib.fa_attention_launch_split.restype = c_status
        lib.fa_attention_launch_split.argtypes = (
            [ctypes.c_void_p] + [p_tensor] * 5 +
            [ctypes.POINTER(FAAttentionExtras), ctypes.POINTER(FASplitKv)] +
            [p_tensor] * 2 + [ctypes.c_void_p])
        lib.fa_attention_launch_paged_split.restype = c_status
        lib.fa_attention_launch_paged_split.argtypes = (
            [ctypes.c_void_p] + [p_tensor] * 6 +
            [ctypes.POINTER(FAAttentionExtras), ctypes.POINTER(FASplitKv)] +
            [p_tensor] * 2 + [ctypes.c_void_p])
        lib.fa_check_block_table.restype = c_status
        lib.fa_check_block_table.argtypes = [p_tensor, p_tensor,
                                             ctypes.c_int64, ctypes.c_int64]
        lib.fa_check_cu_seqlens.restype = c_status
        lib.fa_check_cu_seqlens.argtypes = [p_tensor, ctypes.c_int64]
        lib.fa_cuda_malloc.restype = c_status
        lib.fa_cuda_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.c_size_t]
        lib.fa_cuda_free.restype = c_status
        lib.fa_cuda_free.argtypes = [ctypes.c_void_p]
        lib.fa_cuda_memcpy_htod.restype = c_status
        lib.fa_cuda_memcpy_htod.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_size_t]
        lib.fa_cuda_memcpy_dtoh.restype = c_status
        lib.fa_cuda_memcpy_dtoh.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_size_t]
        lib.fa_cuda_synchronize.restype = c_status
        lib.fa_cuda_synchronize.argtypes = []

    # -- errors ------------------------------------------------------------

    def _check(self, call, status):
        if status != 0:
            message = self.lib.fa_last_error().decode(errors="replace")
            raise FARuntimeError(call, status, message)

    # -- devices -----------------------------------------------------------

    def cuda_available(self):
        """(device count, None) or (0, 'FA_ERROR_...: why')."""
        count = ctypes.c_int(0)
        status = self.lib.fa_cuda_available(ctypes.byref(count))
        if status != 0:
            return 0, (STATUS_NAMES.get(status, str(status)) + ": " +
                       self.lib.fa_last_error().decode(errors="replace"))
        return count.value, None

    def cuda_device_chip(self):
        buf = ctypes.create_string_buffer(16)
        self._check("fa_cuda_device_chip",
                    self.lib.fa_cuda_device_chip(buf, len(buf)))
        return buf.value.decode()

    # -- kernels -----------------------------------------------------------

    def load(self, metadata_path, device):
        handle = ctypes.c_void_p()
        self._check(f"fa_kernel_load({metadata_path})",
                    self.lib.fa_kernel_load(str(metadata_path).encode(),
                                            DEVICES[device],
                                            ctypes.byref(handle)))
        return Kernel(self, handle, str(metadata_path))

    def tensor(self, data_ptr, dtype, shape):
        """A contiguous row-major fa_tensor over `data_ptr` (an int)."""
        sizes = (ctypes.c_int64 * FA_MAX_RANK)(*shape)
        return self.lib.fa_tensor_make(ctypes.c_void_p(data_ptr),
                                       DTYPES[dtype], len(shape), sizes)

    def attention(self, kernel, q, k, v, o, kv_lens=None, mask=None, lse=None,
                  stream=None, alibi=None, q_segments=None, k_segments=None):
        """fa_attention_launch, or fa_attention_launch_ex with the modifier
        operands; `stream` is a CUstream handle (int) or None."""
        ref = lambda t: ctypes.byref(t) if t is not None else None
        cstream = ctypes.c_void_p(stream) if stream else None
        if alibi is None and q_segments is None and k_segments is None:
            self._check(f"fa_attention_launch({kernel.name})",
                        self.lib.fa_attention_launch(
                            kernel.handle, ref(q), ref(k), ref(v),
                            ref(kv_lens), ref(mask), ref(o), ref(lse),
                            cstream))
            return
        addr = lambda t: ctypes.addressof(t) if t is not None else None
        extras = FAAttentionExtras(addr(alibi), addr(q_segments),
                                   addr(k_segments))
        self._check(f"fa_attention_launch_ex({kernel.name})",
                    self.lib.fa_attention_launch_ex(
                        kernel.handle, ref(q), ref(k), ref(v), ref(kv_lens),
                        ref(mask), ctypes.byref(extras), ref(o), ref(lse),
                        cstream))

    def attention_backward(self, kernel, q, k, v, o, lse, d_o, d_q, d_k, d_v,
                           kv_lens=None, mask=None, stream=None, alibi=None,
                           q_segments=None, k_segments=None):
        """fa_attention_backward_launch: dQ, dK, dV from the forward's O and
        LSE; `stream` is a CUstream handle (int) or None."""
        ref = lambda t: ctypes.byref(t) if t is not None else None
        addr = lambda t: ctypes.addressof(t) if t is not None else None
        cstream = ctypes.c_void_p(stream) if stream else None
        extras = FAAttentionExtras(addr(alibi), addr(q_segments),
                                   addr(k_segments))
        self._check(f"fa_attention_backward_launch({kernel.name})",
                    self.lib.fa_attention_backward_launch(
                        kernel.handle, ref(q), ref(k), ref(v), ref(o),
                        ref(lse), ref(d_o), ref(kv_lens), ref(mask),
                        ctypes.byref(extras), ref(d_q), ref(d_k), ref(d_v),
                        cstream))

    def attention_paged(self, kernel, q, k_pages, v_pages, block_table,
                        kv_lens, o, lse=None, stream=None):
        """fa_attention_launch_paged (no mask or extras)."""
        ref = lambda t: ctypes.byref(t) if t is not None else None
        cstream = ctypes.c_void_p(stream) if stream else None
        self._check(f"fa_attention_launch_paged({kernel.name})",
                    self.lib.fa_attention_launch_paged(
                        kernel.handle, ref(q), ref(k_pages), ref(v_pages),
                        ref(block_table), ref(kv_lens), None, None, ref(o),
                        ref(lse), cstream))

    def attention_varlen(self, kernel, q, k, v, cu_seqlens_q, cu_seqlens_k, o,
                         lse=None, stream=None):
        """fa_attention_launch_varlen (no extras)."""
        ref = lambda t: ctypes.byref(t) if t is not None else None
        cstream = ctypes.c_void_p(stream) if stream else None
        self._check(f"fa_attention_launch_varlen({kernel.name})",
                    self.lib.fa_attention_launch_varlen(
                        kernel.handle, ref(q), ref(k), ref(v),
                        ref(cu_seqlens_q), ref(cu_seqlens_k), None, ref(o),
                        ref(lse), cstream))

    def num_splits(self, kernel, batch, nq, nk):
        """fa_attention_num_splits: the heuristic's parts on the device."""
        parts = ctypes.c_int64(0)
        self._check(f"fa_attention_num_splits({kernel.name})",
                    self.lib.fa_attention_num_splits(kernel.handle, batch, nq,
                                                     nk, ctypes.byref(parts)))
        return parts.value

    def workspace_size(self, kernel, batch, nq, num_splits):
        """fa_attention_workspace_size in bytes."""
        nbytes = ctypes.c_size_t(0)
        self._check(f"fa_attention_workspace_size({kernel.name})",
                    self.lib.fa_attention_workspace_size(
                        kernel.handle, batch, nq, num_splits,
                        ctypes.byref(nbytes)))
        return nbytes.value

    def attention_split(self, kernel, q, k, v, o, num_splits, workspace,
                        workspace_bytes, kv_lens=None, lse=None,
                        block_table=None, stream=None):
        """fa_attention_launch_split, or _paged_split with a block table
        (no mask or extras); `workspace` a device pointer (int)."""
        ref = lambda t: ctypes.byref(t) if t is not None else None
        cstream = ctypes.c_void_p(stream) if stream else None
        split = FASplitKv(num_splits, workspace, workspace_bytes)
        if block_table is None:
            self._check(f"fa_attention_launch_split({kernel.name})",
                        self.lib.fa_attention_launch_split(
                            kernel.handle, ref(q), ref(k), ref(v),
                            ref(kv_lens), None, None, ctypes.byref(split),
                            ref(o), ref(lse), cstream))
            return
        self._check(f"fa_attention_launch_paged_split({kernel.name})",
                    self.lib.fa_attention_launch_paged_split(
                        kernel.handle, ref(q), ref(k), ref(v),
                        ref(block_table), ref(kv_lens), None, None,
                        ctypes.byref(split), ref(o), ref(lse), cstream))

    def check_block_table(self, table, lens, num_pages, page_size):
        """fa_check_block_table on host numpy i32 arrays."""
        t = self.tensor(table.ctypes.data, "i32", table.shape)
        l = self.tensor(lens.ctypes.data, "i32", lens.shape)
        self._check("fa_check_block_table",
                    self.lib.fa_check_block_table(ctypes.byref(t),
                                                  ctypes.byref(l), num_pages,
                                                  page_size))

    def check_cu_seqlens(self, cu, tokens):
        """fa_check_cu_seqlens on a host numpy i32 array."""
        t = self.tensor(cu.ctypes.data, "i32", cu.shape)
        self._check("fa_check_cu_seqlens",
                    self.lib.fa_check_cu_seqlens(ctypes.byref(t), tokens))

    # -- memory helpers (no torch needed) ----------------------------------

    def cuda_malloc(self, nbytes):
        ptr = ctypes.c_void_p()
        self._check("fa_cuda_malloc",
                    self.lib.fa_cuda_malloc(ctypes.byref(ptr), nbytes))
        return ptr.value or 0

    def cuda_free(self, ptr):
        self._check("fa_cuda_free", self.lib.fa_cuda_free(ctypes.c_void_p(ptr)))

    def memcpy_htod(self, dst, src_ptr, nbytes):
        self._check("fa_cuda_memcpy_htod",
                    self.lib.fa_cuda_memcpy_htod(ctypes.c_void_p(dst),
                                                 ctypes.c_void_p(src_ptr),
                                                 nbytes))

    def memcpy_dtoh(self, dst_ptr, src, nbytes):
        self._check("fa_cuda_memcpy_dtoh",
                    self.lib.fa_cuda_memcpy_dtoh(ctypes.c_void_p(dst_ptr),
                                                 ctypes.c_void_p(src), nbytes))

    def synchronize(self):
        self._check("fa_cuda_synchronize", self.lib.fa_cuda_synchronize())
