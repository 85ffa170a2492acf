#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Generate frontend-produced linalg-on-tensors inputs for fa-raise-attention.

Attention is written the way model code writes it, in PyTorch and in JAX,
exported with the frontends' own tools, and lowered to linalg on tensors with
the frontends' own pipelines (as shipped in iree-base-compiler's iree-opt):

  PyTorch: iree.turbine.aot.export (torch.export + FX importer) -> torch dialect
           -> iree-opt --pass-pipeline=builtin.module(
                  torch-function-to-torch-backend-pipeline,
                  torch-backend-to-linalg-on-tensors-backend-pipeline)
           (torch-mlir's upstream linalg-on-tensors backend pipeline; the
           output is plain linalg/tensor/arith/math/func)
  JAX:     jax.jit(f).lower(...).as_text()  (or jax.export for symbolic
           shapes) -> StableHLO
           -> iree-opt --iree-stablehlo-input-transformation-pipeline
           (IREE's StableHLO -> linalg legalization; for these programs the
           output is plain linalg/tensor/arith/math/func)

Only needed to (re)generate the checked-in .mlir files; it is not a
dependency of fa.  Requirements (PyPI): torch, jax[cpu], iree-base-compiler,
iree-turbine, numpy.

Usage:  python make_inputs.py [--out DIR] [--only NAME_SUBSTRING]
The intermediate frontend IR (torch dialect / StableHLO) is kept under
DIR/intermediate/ so a lowering can be rerun or inspected by hand.
"""

import argparse
import math
import os
import shutil
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

# Small shapes.
B, H, HKV, N, D = 2, 4, 2, 16, 32
NQ_BR, NK_BR = 16, 32  # bottom-right causal: Nq != Nk
SCALE = 1.0 / math.sqrt(D)
# Score modifiers (issue 15): a softcap small enough to change N(0,1)
# scores, a sliding window of W keys, and ALiBi slopes 2^-(h+1) (JAX's
# constant slopes; the PyTorch ALiBi case takes them as an input).
SOFTCAP = 2.0
WINDOW = 5
ALIBI_SLOPES = [0.5, 0.25, 0.125, 0.0625]

TORCH_PIPELINE = ("builtin.module(torch-function-to-torch-backend-pipeline,"
                  "torch-backend-to-linalg-on-tensors-backend-pipeline)")
JAX_PASSES = ["--iree-stablehlo-input-transformation-pipeline"]


def find_iree_opt():
    cand = os.path.join(os.path.dirname(sys.executable), "iree-opt")
    if os.path.exists(cand):
        return cand
    p = shutil.which("iree-opt")
    if not p:
        sys.exit("iree-opt not found (pip install iree-base-compiler)")
    return p


IREE_OPT = None


def run_iree_opt(src, dst, args):
    cmd = [IREE_OPT, src] + args + ["-o", dst]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("iree-opt failed: %s\n%s" % (" ".join(cmd), r.stderr))
    return cmd


JAX_STAGE2 = ["--iree-stablehlo-to-iree-input", "--reconcile-unrealized-casts",
              "--canonicalize", "--cse"]


def annotate_nonexpanding(src, dst):
    """Mark every dynamic operand dim of stablehlo.dynamic_broadcast_in_dim as
    known non-expanding.  IREE's converter cannot lower a dynamic broadcast
    whose dynamic operand dims might be size-1 expansions.  JAX's
    shape-polymorphic lowering never relies on implicit size-1 expansion of a
    dynamic dim (its size-1 dims are static), so this is semantics-preserving
    for JAX output."""
    from jaxlib.mlir import ir
    from jax._src.interpreters import mlir as jm
    with jm.make_ir_context():
        with open(src) as f:
            m = ir.Module.parse(f.read())
        count = [0]

        def cb(op):
            if op.name == "stablehlo.dynamic_broadcast_in_dim":
                t = ir.RankedTensorType(op.operands[0].type)
                dyn = [i for i in range(t.rank) if t.is_dynamic_dim(i)]
                op.attributes["known_nonexpanding_dimensions"] = ir.DenseI64ArrayAttr.get(dyn)
                count[0] += 1
            return ir.WalkResult.ADVANCE

        m.operation.walk(cb)
        with open(dst, "w") as f:
            f.write(str(m))
    return count[0]


def lower_jax_dynamic(spath, dst):
    """Two-stage lowering for symbolic shapes: run IREE's StableHLO input
    pipeline up to (not including) iree-stablehlo-to-iree-input, annotate the
    dynamic broadcasts, then run the rest of the pipeline."""
    base = spath[:-len(".stablehlo.mlir")]
    pre, fixed = base + ".pre-to-iree-input.mlir", base + ".pre-to-iree-input.annotated.mlir"
    cmd = [IREE_OPT, spath] + JAX_PASSES + [
        "--mlir-print-ir-before=iree-stablehlo-to-iree-input",
        "--mlir-print-ir-module-scope", "--mlir-disable-threading", "-o", os.devnull]
    r = subprocess.run(cmd, capture_output=True, text=True)
    text = r.stderr
    i = text.find("IR Dump Before")
    if i < 0:
        raise RuntimeError("no IR dump before iree-stablehlo-to-iree-input:\n" + text[-2000:])
    body = text[text.index("\n", i) + 1:]
    # The dump is the module; anything after its closing brace is diagnostics.
    end = body.find("\n}\n")
    body = body[:end + 3]
    with open(pre, "w") as f:
        f.write(body)
    annotate_nonexpanding(pre, fixed)
    return run_iree_opt(fixed, dst, JAX_STAGE2)


def header(name, form, frontend_cmd, lower_cmd):
    lines = [
        "// Generated by make_inputs.py -- do not edit by hand.",
        "// case: %s" % name,
        "// form: %s" % form,
        "// frontend: %s" % frontend_cmd,
        "// lowering: iree-opt <frontend IR> %s" % " ".join(lower_cmd[2:-2]),
    ]
    return "\n".join(lines) + "\n"


def prepend(path, text):
    with open(path) as f:
        body = f.read()
    with open(path, "w") as f:
        f.write(text + body)


# --------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------

def torch_cases():
    import torch
    import torch.nn.functional as F

    def r(*shape, dtype=torch.float32):
        return torch.randn(*shape, dtype=dtype)

    class Plain(torch.nn.Module):
        def forward(self, q, k, v):
            s = q @ k.transpose(-2, -1) * SCALE
            return torch.softmax(s, dim=-1) @ v

    class Causal(torch.nn.Module):
        def forward(self, q, k, v):
            nq, nk = q.shape[-2], k.shape[-2]
            s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            mask = torch.tril(torch.ones(nq, nk, dtype=torch.bool))
            s = s.masked_fill(~mask, float("-inf"))
            p = F.softmax(s, dim=-1)
            return torch.matmul(p, v)

    class CausalBottomRight(torch.nn.Module):
        # Nq < Nk, mask aligned to the bottom-right (kv-cache style).
        def forward(self, q, k, v):
            nq, nk = q.shape[-2], k.shape[-2]
            s = torch.matmul(q, k.transpose(-2, -1)) * SCALE
            mask = torch.ones(nq, nk, dtype=torch.bool).tril(diagonal=nk - nq)
            s = s.masked_fill(~mask, float("-inf"))
            return torch.matmul(F.softmax(s, dim=-1), v)

    class GqaBias(torch.nn.Module):
        def forward(self, q, k, v, bias):
            rep = q.shape[1] // k.shape[1]
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            s = torch.matmul(q, k.transpose(-2, -1)) * SCALE
            s = s + bias  # [B, 1, Nq, Nk] additive padding bias
            p = torch.softmax(s, dim=-1)
            return torch.matmul(p, v)

    class Bnhd(torch.nn.Module):
        def forward(self, q, k, v):  # [B, N, H, D]
            s = torch.einsum("bqhd,bkhd->bhqk", q, k) * SCALE
            p = s.softmax(dim=-1)
            return torch.einsum("bhqk,bkhd->bqhd", p, v)

    class F16SoftmaxF32(torch.nn.Module):
        def forward(self, q, k, v):
            s = torch.matmul(q, k.transpose(-2, -1)) * SCALE
            p = torch.softmax(s.float(), dim=-1).half()
            return torch.matmul(p, v)

    class Softmax(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1)

    class BoolMask(torch.nn.Module):
        # mask: bool [B, 1, Nq, Nk], true = attend.
        def forward(self, q, k, v, mask):
            s = q @ k.transpose(-2, -1) * SCALE
            s = s.masked_fill(~mask, float("-inf"))
            return torch.softmax(s, dim=-1) @ v

    class KeyPadding(torch.nn.Module):
        # mask: bool [B, 1, 1, Nk], true = a real (not padded) key.
        def forward(self, q, k, v, mask):
            s = q @ k.transpose(-2, -1) * SCALE
            s = torch.where(mask, s, float("-inf"))
            return torch.softmax(s, dim=-1) @ v

    class Bf16SoftmaxF32(torch.nn.Module):
        def forward(self, q, k, v):
            s = torch.matmul(q, k.transpose(-2, -1)) * SCALE
            p = torch.softmax(s.float(), dim=-1).to(torch.bfloat16)
            return torch.matmul(p, v)

    class ScaleAfterMask(torch.nn.Module):
        # The causal mask is applied to the unscaled scores, then the scale.
        def forward(self, q, k, v):
            nq, nk = q.shape[-2], k.shape[-2]
            s = q @ k.transpose(-2, -1)
            tril = torch.tril(torch.ones(nq, nk, dtype=torch.bool))
            s = s.masked_fill(~tril, float("-inf")) * SCALE
            return torch.softmax(s, dim=-1) @ v

    class HfLlama(torch.nn.Module):
        # transformers' eager attention (Llama): repeat_kv by expand +
        # reshape, an additive causal mask input [B,1,Nq,Nk] in the model
        # dtype, softmax in f32 and back.
        def forward(self, q, k, v, causal_mask):
            b, hkv, s, d = k.shape
            rep = q.shape[1] // hkv
            k = k[:, :, None, :, :].expand(b, hkv, rep, s, d).reshape(b, hkv * rep, s, d)
            v = v[:, :, None, :, :].expand(b, hkv, rep, s, d).reshape(b, hkv * rep, s, d)
            w = torch.matmul(q, k.transpose(2, 3)) * SCALE
            w = w + causal_mask
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            return torch.matmul(w, v)

    class Annotated(torch.nn.Module):
        # The Annotated Transformer: masked_fill(mask == 0, -1e9), an int mask.
        def forward(self, q, k, v, mask):
            s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
            s = s.masked_fill(mask == 0, -1e9)
            return torch.matmul(s.softmax(dim=-1), v)

    class Bert(torch.nn.Module):
        # BERT's extended attention mask: (1 - mask) * -10000 added, from a
        # float [B, Nk] padding mask (1 = a real key).
        def forward(self, q, k, v, mask):
            ext = (1.0 - mask[:, None, None, :]) * -10000.0
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1)) + ext
            return torch.matmul(torch.softmax(s, -1), v)

    class TriuBias(torch.nn.Module):
        # A causal additive bias full(-inf).triu(1).
        def forward(self, q, k, v):
            n = q.shape[-2]
            bias = torch.full((n, n), float("-inf")).triu(1)
            s = q @ k.transpose(-2, -1) * SCALE + bias
            return torch.softmax(s, -1) @ v

    class Softcap(torch.nn.Module):
        # Gemma 2's eager attention: scores / cap, tanh, * cap, then the
        # causal mask.
        def forward(self, q, k, v):
            nq, nk = q.shape[-2], k.shape[-2]
            w = torch.matmul(q, k.transpose(2, 3)) * SCALE
            w = w / SOFTCAP
            w = torch.tanh(w)
            w = w * SOFTCAP
            mask = torch.tril(torch.ones(nq, nk, dtype=torch.bool))
            w = w.masked_fill(~mask, float("-inf"))
            return torch.matmul(F.softmax(w, dim=-1), v)

    class SoftcapBiased(torch.nn.Module):
        # A near miss: the bias is added before the softcap, which fa
        # applies first.
        def forward(self, q, k, v, bias):
            w = torch.matmul(q, k.transpose(2, 3)) * SCALE + bias
            w = SOFTCAP * torch.tanh(w / SOFTCAP)
            return torch.matmul(F.softmax(w, dim=-1), v)

    class Alibi(torch.nn.Module):
        # MPT's build_alibi_bias (full): int32 relative positions, abs,
        # mul(-1), times the slopes [1,H,1,1]; causal masked_fill.
        def forward(self, q, k, v, slopes):
            nq, nk = q.shape[-2], k.shape[-2]
            rel = torch.arange(1 - nk, 1, dtype=torch.int32).view(1, 1, 1, nk)
            rel = rel - torch.arange(1 - nq, 1, dtype=torch.int32).view(1, 1, nq, 1)
            bias = rel.abs().mul(-1) * slopes.view(1, -1, 1, 1)
            s = q @ k.transpose(-2, -1) * SCALE + bias
            mask = torch.tril(torch.ones(nq, nk, dtype=torch.bool))
            s = s.masked_fill(~mask, float("-inf"))
            return torch.softmax(s, dim=-1) @ v

    class SlidingWindow(torch.nn.Module):
        # transformers' sliding-window causal mask (Mistral, before SDPA
        # masks): an additive finfo.min mask, 0 where mask_cond < row + 1,
        # then the keys WINDOW or more back filled with finfo.min again.
        def forward(self, q, k, v):
            n = q.shape[-2]
            lowest = torch.finfo(torch.float32).min
            mask = torch.full((n, n), lowest)
            cond = torch.arange(n)
            mask = mask.masked_fill(cond < (cond + 1).view(n, 1), 0.0)
            context = torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-WINDOW)
            mask = mask.masked_fill(context, lowest)
            s = q @ k.transpose(-2, -1) * SCALE + mask
            return torch.softmax(s, dim=-1) @ v

    class Sdpa(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v)

    class SdpaCausal(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    qkv = lambda n=N, dt=torch.float32: (r(B, H, n, D, dtype=dt),
                                          r(B, H, n, D, dtype=dt),
                                          r(B, H, n, D, dtype=dt))
    from torch.export import Dim
    seq = Dim("seq", min=2, max=4096)

    cases = [
        ("torch_plain_f32", "softmax(q @ k.transpose(-2,-1) * scale) @ v, [B,H,N,D]",
         Plain(), qkv(), None),
        ("torch_causal_f32", "torch.tril(ones(bool)) + masked_fill(~mask, -inf), scale as / sqrt(D)",
         Causal(), qkv(), None),
        ("torch_causal_bottomright_f32", "tril(diagonal=Nk-Nq) + masked_fill(~mask,-inf), Nq=16 Nk=32",
         CausalBottomRight(), (r(B, H, NQ_BR, D), r(B, H, NK_BR, D), r(B, H, NK_BR, D)), None),
        ("torch_gqa_bias_f32", "GQA via repeat_interleave(2, dim=1) of K/V (H=4, Hkv=2) + additive bias [B,1,Nq,Nk]",
         GqaBias(), (r(B, H, N, D), r(B, HKV, N, D), r(B, HKV, N, D), r(B, 1, N, N)), None),
        ("torch_bnhd_f32", "[B,N,H,D] layout, einsum('bqhd,bkhd->bhqk') / einsum('bhqk,bkhd->bqhd')",
         Bnhd(), (r(B, N, H, D), r(B, N, H, D), r(B, N, H, D)), None),
        ("torch_plain_f16_softmax_f32", "f16 q/k/v, softmax(s.float()).half()",
         F16SoftmaxF32(), qkv(dt=torch.float16), None),
        ("torch_softmax_f32", "standalone torch.softmax(x, dim=-1), [B,H,N,N]",
         Softmax(), (r(B, H, N, N),), None),
        ("torch_plain_dyn_f32", "plain attention, dynamic sequence length (torch.export Dim on N of q/k/v)",
         Plain(), qkv(), {"q": {2: seq}, "k": {2: seq}, "v": {2: seq}}),
        ("torch_causal_dyn_f32", "causal (tril + masked_fill), dynamic sequence length",
         Causal(), qkv(), {"q": {2: seq}, "k": {2: seq}, "v": {2: seq}}),
        ("torch_sdpa_f32", "F.scaled_dot_product_attention(q, k, v)",
         Sdpa(), qkv(), None),
        ("torch_sdpa_causal_f32", "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
         SdpaCausal(), qkv(), None),
        # torch.export(...).run_decompositions(): PyTorch's own math decomposition
        # of SDPA (sqrt(scale) on q and on k, causal mask as a 0/-inf additive
        # bias from arange comparisons), as a frontend without an SDPA op sees it.
        ("torch_sdpa_decomposed_f32", "F.scaled_dot_product_attention, torch.export(...).run_decompositions()",
         Sdpa(), qkv(), "decompose"),
        ("torch_sdpa_causal_decomposed_f32",
         "F.scaled_dot_product_attention(is_causal=True), torch.export(...).run_decompositions()",
         SdpaCausal(), qkv(), "decompose"),
        ("torch_bool_mask_f32", "s.masked_fill(~mask, -inf), mask a bool input [B,1,Nq,Nk], scale multiply",
         BoolMask(), qkv() + (torch.rand(B, 1, N, N) < 0.7,), None),
        ("torch_key_padding_f32", "key padding: torch.where(mask, s, -inf), mask a bool input [B,1,1,Nk]",
         KeyPadding(), qkv() + (torch.rand(B, 1, 1, N) < 0.7,), None),
        ("torch_plain_bf16_softmax_f32", "bf16 q/k/v, softmax(s.float()).to(torch.bfloat16)",
         Bf16SoftmaxF32(), qkv(dt=torch.bfloat16), None),
        ("torch_scale_after_mask_f32", "causal tril + masked_fill(~tril, -inf) on the unscaled S, then * scale",
         ScaleAfterMask(), qkv(), None),
        ("torch_hf_llama_bf16", "transformers' eager Llama attention: repeat_kv (expand+reshape, Hkv=2), "
         "bf16, + causal_mask input [B,1,Nq,Nk] bf16, softmax(dtype=float32).to(bf16)",
         HfLlama(), (r(B, H, N, D, dtype=torch.bfloat16), r(B, HKV, N, D, dtype=torch.bfloat16),
                     r(B, HKV, N, D, dtype=torch.bfloat16), r(B, 1, N, N, dtype=torch.bfloat16)), None),
        ("torch_annotated_f32", "The Annotated Transformer: masked_fill(mask == 0, -1e9), mask an int64 input [B,1,Nq,Nk]",
         Annotated(), qkv() + (torch.ones(B, 1, N, N, dtype=torch.int64),), None),
        ("torch_bert_f32", "BERT: (1 - mask[:, None, None, :]) * -10000 added, mask a float input [B,Nk]",
         Bert(), qkv() + (torch.ones(B, N),), None),
        ("torch_triu_bias_f32", "causal as an additive bias torch.full((n, n), -inf).triu(1)",
         TriuBias(), qkv(), None),
        ("torch_softcap_f32", "Gemma 2: w / cap, torch.tanh, * cap (cap = 2), then causal masked_fill",
         Softcap(), qkv(), None),
        ("torch_softcap_biased_f32", "near miss: cap * tanh((s + bias) / cap), bias an input [B,1,Nq,Nk] "
         "added before the softcap", SoftcapBiased(), qkv() + (r(B, 1, N, N),), None),
        ("torch_alibi_f32", "MPT ALiBi: (arange(1-Nk,1) - arange(1-Nq,1)[:,None]).abs().mul(-1) (int32) "
         "* slopes.view(1,H,1,1), slopes an input [H]; causal masked_fill",
         Alibi(), qkv() + (torch.rand(H),), None),
        ("torch_window_f32", "transformers' sliding-window mask: full(finfo.min).masked_fill(arange < "
         "(arange + 1).view(n, 1), 0).masked_fill(tril(ones, diagonal=-5), finfo.min) added",
         SlidingWindow(), qkv(), None),
    ]
    return cases


def gen_torch(out, only):
    import iree.turbine.aot as aot
    inter = os.path.join(out, "intermediate")
    results = []
    for name, form, mod, args, dyn in torch_cases():
        if only and only not in name:
            continue
        try:
            import torch
            if dyn == "decompose":
                e = aot.export(torch.export.export(mod, args).run_decompositions())
                dyn = None
                fdesc = "iree.turbine.aot.export(torch.export.export(module, args).run_decompositions())"
            else:
                kw = {"args": args}
                if dyn is not None:
                    kw["dynamic_shapes"] = dyn
                e = aot.export(mod, **kw)
                fdesc = "iree.turbine.aot.export(module, args=...%s)" % (
                    ", dynamic_shapes=%r" % dyn if dyn else "")
            tpath = os.path.join(inter, name + ".torch.mlir")
            with open(tpath, "w") as f:
                f.write(str(e.mlir_module))
            dst = os.path.join(out, name + ".mlir")
            cmd = run_iree_opt(tpath, dst, ["--pass-pipeline=" + TORCH_PIPELINE])
            prepend(dst, header(name, form, fdesc, cmd))
            results.append((name, "ok", ""))
            print("wrote", dst)
        except Exception as ex:  # keep going, record
            traceback.print_exc()
            results.append((name, "FAILED", str(ex).splitlines()[0][:300]))
    return results


# --------------------------------------------------------------------------
# JAX
# --------------------------------------------------------------------------

def jax_cases():
    import jax
    import jax.numpy as jnp

    def plain(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * SCALE
        return jax.nn.softmax(s, axis=-1) @ v

    def plain_matmul(q, k, v):
        s = q @ jnp.swapaxes(k, -1, -2) * SCALE
        return jnp.matmul(jax.nn.softmax(s, axis=-1), v)

    def causal(q, k, v):
        nq, nk = q.shape[-2], k.shape[-2]
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
        mask = jnp.tril(jnp.ones((nq, nk), dtype=bool))
        s = jnp.where(mask, s, -jnp.inf)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    def causal_bottomright(q, k, v):
        nq, nk = q.shape[-2], k.shape[-2]
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * SCALE
        mask = jnp.tril(jnp.ones((nq, nk), dtype=bool), k=nk - nq)
        s = jnp.where(mask, s, -jnp.inf)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    def gqa_bias(q, k, v, bias):
        rep = q.shape[1] // k.shape[1]
        k = jnp.repeat(k, rep, axis=1)
        v = jnp.repeat(v, rep, axis=1)
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * SCALE + bias
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    def bnhd(q, k, v):  # [B, N, H, D]
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * SCALE
        p = jax.nn.softmax(s, axis=-1)
        return jnp.einsum("bhqk,bkhd->bqhd", p, v)

    def f16_softmax_f32(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * jnp.asarray(SCALE, q.dtype)
        p = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(q.dtype)
        return jnp.einsum("bhqk,bhkd->bhqd", p, v)

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    def bool_mask(q, k, v, mask):  # mask: bool [B, 1, Nq, Nk], true = attend
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * SCALE
        s = jnp.where(mask, s, -jnp.inf)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    def dpa(q, k, v):  # jax.nn.dot_product_attention wants [B, N, H, D]
        return jax.nn.dot_product_attention(q, k, v)

    def dpa_causal(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True)

    def flax_dpa(q, k, v, mask):
        # The body of flax.linen.dot_product_attention ([B,N,H,D]): q scaled
        # first, einsum '...qhd,...khd->...hqk', where(mask, w, finfo.min).
        q = q / jnp.sqrt(q.shape[-1]).astype(q.dtype)
        w = jnp.einsum("...qhd,...khd->...hqk", q, k)
        w = jnp.where(mask, w, jnp.finfo(w.dtype).min)
        w = jax.nn.softmax(w)
        return jnp.einsum("...hqk,...khd->...qhd", w, v)

    def grouped_gqa(q, k, v):
        # GQA as Gemma-style JAX code writes it: q [B,N,H,D] reshaped to
        # [B,N,Hkv,G,D], grouped einsums, causal where with a finite fill,
        # softmax in f32.
        b, n, h, d = q.shape
        g = h // k.shape[2]
        qg = q.reshape(b, n, k.shape[2], g, d)
        s = jnp.einsum("bqkgd,bskd->bkgqs", qg, k) * (d ** -0.5)
        nq, ns = s.shape[-2:]
        s = jnp.where(jnp.tril(jnp.ones((nq, ns), bool)), s, -2.3819763e38)
        p = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(q.dtype)
        o = jnp.einsum("bkgqs,bskd->bqkgd", p, v)
        return o.reshape(b, n, h, d)

    def softcap(q, k, v):
        nq, nk = q.shape[-2], k.shape[-2]
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * SCALE
        s = SOFTCAP * jnp.tanh(s / SOFTCAP)
        s = jnp.where(jnp.tril(jnp.ones((nq, nk), dtype=bool)), s, -jnp.inf)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    def alibi_bottomright(q, k, v):
        # Positions of a kv cache: query i at key position i + Nk - Nq;
        # bias -slope[h] * |pos_q - pos_k|, constant slopes; causal.
        nq, nk = q.shape[-2], k.shape[-2]
        pos_q = jnp.arange(nq)[:, None] + (nk - nq)
        pos_k = jnp.arange(nk)[None, :]
        slopes = jnp.asarray(ALIBI_SLOPES, jnp.float32)
        bias = -slopes[:, None, None] * jnp.abs(pos_q - pos_k).astype(jnp.float32)
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * SCALE + bias
        s = jnp.where(pos_k <= pos_q, s, -jnp.inf)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    def alibi_squared(q, k, v):
        # A near miss: a squared distance, not ALiBi's |q - k|.
        nq, nk = q.shape[-2], k.shape[-2]
        d = jnp.arange(nq)[:, None] - jnp.arange(nk)[None, :]
        slopes = jnp.asarray(ALIBI_SLOPES, jnp.float32)
        bias = -slopes[:, None, None] * (d * d).astype(jnp.float32)
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * SCALE + bias
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    def sliding_window(q, k, v):
        # Causal, and keys more than WINDOW - 1 back dropped (iota compares).
        nq, nk = q.shape[-2], k.shape[-2]
        qi = jnp.arange(nq)[:, None]
        ki = jnp.arange(nk)[None, :]
        keep = (ki <= qi) & (ki > qi - WINDOW)
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * SCALE
        s = jnp.where(keep, s, -jnp.inf)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    def local_window(q, k, v):
        # Non-causal local attention: |q - k| <= 2.
        nq, nk = q.shape[-2], k.shape[-2]
        dist = jnp.abs(jnp.arange(nq)[:, None] - jnp.arange(nk)[None, :])
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * SCALE
        s = jnp.where(dist <= 2, s, -jnp.inf)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    S = jax.ShapeDtypeStruct
    f32, f16, bf16 = jnp.float32, jnp.float16, jnp.bfloat16
    qkv = lambda dt=f32: (S((B, H, N, D), dt),) * 3
    bnhd_args = (S((B, N, H, D), f32),) * 3

    cases = [
        ("jax_plain_f32", "jnp.einsum('bhqd,bhkd->bhqk')*scale, jax.nn.softmax, @ v", plain, qkv(), None),
        ("jax_plain_matmul_f32", "q @ swapaxes(k,-1,-2) * scale, jax.nn.softmax, jnp.matmul", plain_matmul, qkv(), None),
        ("jax_causal_f32", "jnp.tril(ones(bool)) + jnp.where(mask, s, -inf), scale as / sqrt(D)", causal, qkv(), None),
        ("jax_causal_bottomright_f32", "jnp.tril(ones, k=Nk-Nq) + where, Nq=16 Nk=32", causal_bottomright,
         (S((B, H, NQ_BR, D), f32), S((B, H, NK_BR, D), f32), S((B, H, NK_BR, D), f32)), None),
        ("jax_gqa_bias_f32", "GQA via jnp.repeat(k, 2, axis=1) (H=4, Hkv=2) + additive bias [B,1,Nq,Nk]", gqa_bias,
         (S((B, H, N, D), f32), S((B, HKV, N, D), f32), S((B, HKV, N, D), f32), S((B, 1, N, N), f32)), None),
        ("jax_bnhd_f32", "[B,N,H,D] layout, einsum('bqhd,bkhd->bhqk') / einsum('bhqk,bkhd->bqhd')", bnhd, bnhd_args, None),
        ("jax_plain_f16_softmax_f32", "f16 q/k/v, softmax(s.astype(f32)).astype(f16)", f16_softmax_f32, qkv(f16), None),
        ("jax_softmax_f32", "standalone jax.nn.softmax(x, axis=-1), [B,H,N,N]", softmax, (S((B, H, N, N), f32),), None),
        ("jax_plain_dyn_f32", "plain attention, symbolic sequence length (jax.export symbolic_shape 'n')", plain, None,
         "dyn_plain"),
        ("jax_causal_dyn_f32", "causal (tril + where), symbolic sequence length", causal, None, "dyn_causal"),
        ("jax_dpa_f32", "jax.nn.dot_product_attention(q,k,v) ([B,N,H,D])", dpa, bnhd_args, None),
        ("jax_dpa_causal_f32", "jax.nn.dot_product_attention(q,k,v,is_causal=True) ([B,N,H,D])", dpa_causal, bnhd_args, None),
        ("jax_bool_mask_f32", "jnp.where(mask, s, -inf), mask a bool input [B,1,Nq,Nk], scale multiply", bool_mask,
         qkv() + (S((B, 1, N, N), jnp.bool_),), None),
        ("jax_plain_bf16_softmax_f32", "bf16 q/k/v, softmax(s.astype(f32)).astype(bf16)", f16_softmax_f32,
         qkv(bf16), None),
        ("jax_flax_dpa_f32", "flax.linen.dot_product_attention's body: q / sqrt(D), "
         "einsum('...qhd,...khd->...hqk'), where(mask, w, finfo.min), mask a bool input [B,1,Nq,Nk]",
         flax_dpa, bnhd_args + (S((B, 1, N, N), jnp.bool_),), None),
        ("jax_grouped_gqa_f32", "GQA with q reshaped to [B,N,Hkv,G,D] and grouped einsums "
         "('bqkgd,bskd->bkgqs'), causal where with a finite fill, softmax in f32 ([B,N,H,D], Hkv=2)",
         grouped_gqa, (S((B, N, H, D), f32), S((B, N, HKV, D), f32), S((B, N, HKV, D), f32)), None),
        ("jax_softcap_f32", "cap * jnp.tanh(s / cap) (cap = 2), causal tril + where", softcap, qkv(), None),
        ("jax_alibi_bottomright_f32", "ALiBi -slopes[h] * |pos_q - pos_k| with pos_q = i + Nk - Nq, constant "
         "slopes 2^-(h+1), causal pos_k <= pos_q, Nq=16 Nk=32", alibi_bottomright,
         (S((B, H, NQ_BR, D), f32), S((B, H, NK_BR, D), f32), S((B, H, NK_BR, D), f32)), None),
        ("jax_alibi_squared_f32", "near miss: -slopes[h] * (q - k)^2, a squared distance", alibi_squared,
         qkv(), None),
        ("jax_window_f32", "sliding window: where((k <= q) & (k > q - 5), s, -inf) from iotas", sliding_window,
         qkv(), None),
        ("jax_local_window_f32", "non-causal local window: where(|q - k| <= 2, s, -inf)", local_window,
         qkv(), None),
    ]
    return cases


def gen_jax(out, only):
    import jax
    import jax.numpy as jnp
    from jax import export as jexport
    inter = os.path.join(out, "intermediate")
    results = []
    for name, form, fn, args, dyn in jax_cases():
        if only and only not in name:
            continue
        try:
            if dyn is None:
                text = jax.jit(fn).lower(*args).as_text()
                fcmd = "jax.jit(f).lower(*ShapeDtypeStructs).as_text()"
            else:
                (n,) = jexport.symbolic_shape("n")
                spec = jax.ShapeDtypeStruct((B, H, n, D), jnp.float32)
                exp = jexport.export(jax.jit(fn))(spec, spec, spec)
                text = exp.mlir_module()
                fcmd = "jax.export.export(jax.jit(f))(ShapeDtypeStruct((B,H,n,D)) x3).mlir_module(), n symbolic"
            spath = os.path.join(inter, name + ".stablehlo.mlir")
            with open(spath, "w") as f:
                f.write(text)
            dst = os.path.join(out, name + ".mlir")
            if dyn is None:
                cmd = run_iree_opt(spath, dst, JAX_PASSES)
            else:
                cmd = lower_jax_dynamic(spath, dst)
                cmd = cmd[:2] + JAX_PASSES + [
                    "(stopped before iree-stablehlo-to-iree-input; dynamic_broadcast_in_dim annotated"
                    " known_nonexpanding_dimensions=<dynamic operand dims>; then)"] + JAX_STAGE2 + cmd[-2:]
            prepend(dst, header(name, form, fcmd, cmd))
            results.append((name, "ok", ""))
            print("wrote", dst)
        except Exception as ex:
            traceback.print_exc()
            results.append((name, "FAILED", str(ex).splitlines()[0][:300]))
    return results


def main():
    global IREE_OPT
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--only", default=None)
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--skip-jax", action="store_true")
    a = ap.parse_args()
    IREE_OPT = find_iree_opt()
    os.makedirs(os.path.join(a.out, "intermediate"), exist_ok=True)
    res = []
    if not a.skip_torch:
        res += gen_torch(a.out, a.only)
    if not a.skip_jax:
        res += gen_jax(a.out, a.only)
    print("\nsummary:")
    for n, st, msg in res:
        print("  %-32s %s %s" % (n, st, msg))
    return 0 if all(st == "ok" for _, st, _ in res) else 1


if __name__ == "__main__":
    sys.exit(main())
