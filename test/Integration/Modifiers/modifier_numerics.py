# RUN: %python %s %fa_opt
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Numerics of fa.attention's score and mask modifiers (window, softcap,
ALiBi, chunk, segments, q_offset) against the float64 reference of
test/lib/fa_reference.py, which is written from the op description.

Each case embeds seeded random inputs as constants in a module whose @attn
holds one fa.attention, and runs it five ways (fa-opt, then mlir-runner):
  * reference: --fa-lower-to-cpu=reference=1 (fa-decompose-reference);
  * tiled: --fa-lower-to-cpu with small tiles (fa-tile-attention: key tiles
    skipped before the window/chunk begin and past its end, partial tiles
    masked), so every case crosses several query and key tiles;
  * tiling: transform.structured.tile_using_forall through the
    TilingInterface model (query tiles of 7 rows: positions re-based with
    q_offset, keys sliced or padded), then --fa-lower-to-cpu;
  * vector, vector8: @attn in the kernel form (memref arguments, as
    fa-compile builds kernels) through fa-cpu-attention with
    require-kernel-form (the CPU vector kernel: key tiles from the window
    and chunk bounds, full tiles without element masks), 16 lanes with
    query tiles of 16 and key tiles of 8, and 8 lanes (AVX2) with query
    tiles of 8 and key tiles of 16.
Pass criteria: relative Frobenius error of O and LSE below 2e-5
(printMemrefF32 prints 6 digits); rows with no attended key exactly O = 0
and LSE = -inf; no NaN.

Mutations (the comparison can fail): the vector kernel of a case is edited
and must then fail it:
  full_tiles       (window) every key tile is taken as full (the tile's
                   element-mask predicate forced false): keys outside the
                   window leak in;
  window_off_by_1  (window) the window's left bound `k >= q + off - L`
                   becomes `k > q + off - L`;
  segment_full     (sorted segments) a key tile spanning two documents is
                   taken as full when the query tile lies in one (the
                   `min != max` test of the key ids dropped);
  segment_skip     (sorted segments) a key tile whose first id is the
                   query tile's last is skipped (`kmin > qmax` becomes
                   `kmin >= qmax`);
  region_not_offset (score_mod reading a relative-bias table) the tiled
                   op's region does not add the query tile's origin to
                   its q index (tiling way): it reads another row's bias;
  block_partial_full (prefix-LM mask_mod with a block mask) the block
                   mask marks partial tiles full, so the vector kernel
                   skips the mask_mod on them;
  decode_row_head  (GQA decode with a window) the decode kernel reads the
                   Q rows of a packed tile from head kv_head * G + row / G
                   instead of kv_head * G + row % G.

General score_mod / mask_mod regions (test/lib/modifier_regions.py) run
through the same five ways, against numpy versions of the regions.
"""

import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import (compare_outputs, modifier_inputs,  # noqa: E402
                          reference, seed_of)
from modifier_regions import block_mask_text, region_case  # noqa: E402
from mlir_exec import (MLIR_TYPES, PRINT_DECL, constant,  # noqa: E402
                       execute, fa_opt, finish, print_call, rel_err,
                       tensor_type)

FA_OPT = sys.argv[1]
ONLY = sys.argv[2:]
CAUSAL = {"none": "", "top-left": " causal(top_left)",
          "bottom-right": " causal(bottom_right)"}


def ttype(a):
    return tensor_type(a.shape, {np.dtype(np.float32): "f32",
                                 np.dtype(np.bool_): "i1",
                                 np.dtype(np.int32): "i32"}[a.dtype])


def build_arrays(c, rng):
    """The case's inputs, the fa.attention operand clauses, the q_offset
    constant, the attributes (and regions) and the numpy score_mod /
    mask_mod (a dict of reference() keywords)."""
    B, Hq, Hkv, Nq, Nk, D = c["B"], c["Hq"], c["Hkv"], c["Nq"], c["Nk"], c["D"]
    a = {"q": rng.standard_normal((B, Hq, Nq, D), dtype=np.float32) * c["mag"],
         "k": rng.standard_normal((B, Hkv, Nk, D), dtype=np.float32),
         "v": rng.standard_normal((B, Hkv, Nk, D), dtype=np.float32)}
    clauses = ""
    if c["lens"] is not None:
        a["lens"] = np.array(c["lens"], dtype=np.int32)
        clauses += f" kv_lens(%lens : {ttype(a['lens'])})"
    if c["mask"] == "bool":
        a["mask"] = rng.random((B, 1, Nq, Nk)) < 0.8
        clauses += f" mask(%mask : {ttype(a['mask'])})"
    elif c["mask"] == "float":
        a["mask"] = rng.standard_normal((1, Hq, Nq, Nk), dtype=np.float32)
        clauses += f" mask(%mask : {ttype(a['mask'])})"
    a.update(modifier_inputs(rng, B, Hq, Nq, Nk, c["alibi"], c["segments"]))
    if "alibi" in a:
        clauses += f" alibi(%alibi : {ttype(a['alibi'])})"
    if "qs" in a:
        clauses += (f" segments(%qs, %ks : {ttype(a['qs'])}, "
                    f"{ttype(a['ks'])})")
    pre = ""
    if c["q_offset"]:
        pre = f"    %p = arith.constant {c['q_offset']} : index\n"
        clauses += " q_offset(%p)"
    attrs = CAUSAL[c["causal"]]
    if c["window"] is not None:
        attrs += f" window({c['window'][0]}, {c['window'][1]})"
    if c["softcap"] is not None:
        attrs += f" softcap({c['softcap']!r})"
    if c["chunk"] is not None:
        attrs += f" chunk({c['chunk']})"
    refmods = {}
    if c["regions"]:
        ops, clause, text, score, mask = region_case(c["regions"], rng, B,
                                                     Hq, Nq, Nk)
        a.update(ops)
        if c["block_mask"]:
            # Built from the same mask_mod in @attn (tensor form) or @main
            # (kernel form, passed as a memref).
            bm, bm_t = block_mask_text(c["regions"], list(ops.values()), B,
                                       Hq, Nq, Nk, c["block_mask"],
                                       ["%" + n for n in ops])
            pre += bm
            clauses += f" block_mask(%bm : {bm_t})"
            attrs += " block_tiles({}, {})".format(*c["block_mask"])
        clauses += clause
        attrs += text
        refmods = dict(score_mod=score, mask_mod=mask)
    return a, clauses, pre, attrs, refmods


def build(c, rng):
    """The case's inputs and a module whose @attn takes and returns
    tensors."""
    B, Hq, Nq, D = c["B"], c["Hq"], c["Nq"], c["D"]
    a, clauses, pre, attrs, refmods = build_arrays(c, rng)
    o_t = tensor_type((B, Hq, Nq, D), "f32")
    l_t = tensor_type((B, Hq, Nq), "f32")
    params = ", ".join(f"%{n}: {ttype(x)}" for n, x in a.items())
    body = f"""
  func.func @attn({params}) -> ({o_t}, {l_t}) {{
{pre}    %o0 = tensor.empty() : {o_t}
    %l0 = tensor.empty() : {l_t}
    %o, %l = fa.attention ins(%q, %k, %v : {ttype(a['q'])}, {ttype(a['k'])}, {ttype(a['v'])}){clauses}
        outs(%o0 : {o_t}, %l0 : {l_t}){attrs} -> {o_t}, {l_t}
    return %o, %l : {o_t}, {l_t}
  }}
"""
    consts = "".join(constant("c_" + n, x) for n, x in a.items())
    call_args = ", ".join("%c_" + n for n in a)
    call_types = ", ".join(ttype(x) for x in a.values())
    text = ("module {\n" + PRINT_DECL + body + "  func.func @main() {\n" +
            consts +
            f"    %r:2 = func.call @attn({call_args}) : ({call_types}) -> "
            f"({o_t}, {l_t})\n" +
            print_call("%r#0", (B, Hq, Nq, D), "o") +
            print_call("%r#1", (B, Hq, Nq), "l") + "    return\n  }\n}\n")
    return a, text, clauses, attrs, refmods


def memref_type(shape, elt):
    return "memref<" + "".join(f"{d}x" for d in shape) + elt + ">"


def build_kernel_form(c, a, clauses, attrs):
    """A module whose @attn is in the kernel form, as fa-compile builds
    kernels: memref arguments read through bufferization.to_tensor (a
    boolean mask as i8 bytes, converted to i1), the q_offset an index
    argument, the results materialized into the output memrefs."""
    B, Hq, Nq, D = c["B"], c["Hq"], c["Nq"], c["D"]
    o_m = memref_type((B, Hq, Nq, D), "f32")
    l_m = memref_type((B, Hq, Nq), "f32")
    o_t = tensor_type((B, Hq, Nq, D), "f32")
    l_t = tensor_type((B, Hq, Nq), "f32")
    params, body, consts, call, ctypes = [], "", "", [], []
    for n, x in a.items():
        if x.dtype == np.bool_:
            x = x.astype(np.int8)
        elt = MLIR_TYPES[x.dtype]
        mt, tt = memref_type(x.shape, elt), tensor_type(x.shape, elt)
        params.append(f"%{n}_m: {mt}")
        consts += constant("c_" + n, x)
        consts += f"    %a_{n} = bufferization.to_buffer %c_{n} : {tt} to {mt}\n"
        call.append(f"%a_{n}")
        ctypes.append(mt)
        if elt != "i8":
            body += (f"    %{n} = bufferization.to_tensor %{n}_m restrict : "
                     f"{mt} to {tt}\n")
            continue
        bt = tensor_type(x.shape, "i1")
        ids = ", ".join(f"d{i}" for i in range(x.ndim))
        idm = f"affine_map<({ids}) -> ({ids})>"
        iters = ", ".join(['"parallel"'] * x.ndim)
        body += (f"    %{n}_b = bufferization.to_tensor %{n}_m restrict : "
                 f"{mt} to {tt}\n"
                 f"    %{n}_e = tensor.empty() : {bt}\n"
                 f"    %{n} = linalg.generic {{indexing_maps = [{idm}, {idm}], "
                 f"iterator_types = [{iters}]}} ins(%{n}_b : {tt}) "
                 f"outs(%{n}_e : {bt}) {{\n"
                 f"    ^bb0(%x: i8, %y: i1):\n"
                 f"      %z = arith.constant 0 : i8\n"
                 f"      %t = arith.cmpi ne, %x, %z : i8\n"
                 f"      linalg.yield %t : i1\n"
                 f"    }} -> {bt}\n")
    if c["q_offset"]:
        params.append("%p: index")
        consts += f"    %p = arith.constant {c['q_offset']} : index\n"
        call.append("%p")
        ctypes.append("index")
    if c["block_mask"]:
        mods = [x for n, x in a.items() if n.startswith("mod")]
        names = ["%c_" + n for n in a if n.startswith("mod")]
        bm, bm_t = block_mask_text(c["regions"], mods, c["B"], c["Hq"], Nq,
                                   c["Nk"], c["block_mask"], names,
                                   result="%bm_t")
        bm_m = "memref<" + bm_t[len("tensor<"):]
        params.append(f"%bm_m: {bm_m}")
        body += (f"    %bm = bufferization.to_tensor %bm_m restrict : "
                 f"{bm_m} to {bm_t}\n")
        consts += bm + (f"    %a_bm = bufferization.to_buffer %bm_t : "
                        f"{bm_t} to {bm_m}\n")
        call.append("%a_bm")
        ctypes.append(bm_m)
    params += [f"%o_m: {o_m}", f"%l_m: {l_m}"]
    call += ["%out_o", "%out_l"]
    ctypes += [o_m, l_m]
    qkv = f"{ttype(a['q'])}, {ttype(a['k'])}, {ttype(a['v'])}"
    kernel = (
        f"  func.func @attn({', '.join(params)}) {{\n" + body +
        f"    %o0 = tensor.empty() : {o_t}\n"
        f"    %l0 = tensor.empty() : {l_t}\n"
        f"    %o, %l = fa.attention ins(%q, %k, %v : {qkv}){clauses}\n"
        f"        outs(%o0 : {o_t}, %l0 : {l_t}){attrs} -> {o_t}, {l_t}\n"
        f"    bufferization.materialize_in_destination %o in restrict "
        f"writable %o_m : ({o_t}, {o_m}) -> ()\n"
        f"    bufferization.materialize_in_destination %l in restrict "
        f"writable %l_m : ({l_t}, {l_m}) -> ()\n"
        "    return\n  }\n")
    main = ("  func.func @main() {\n" + consts +
            f"    %out_o = memref.alloc() : {o_m}\n"
            f"    %out_l = memref.alloc() : {l_m}\n"
            f"    func.call @attn({', '.join(call)}) : "
            f"({', '.join(ctypes)}) -> ()\n")
    for n, m in (("out_o", o_m), ("out_l", l_m)):
        main += (f"    %{n}_u = memref.cast %{n} : {m} to memref<*xf32>\n"
                 f"    func.call @printMemrefF32(%{n}_u) : "
                 "(memref<*xf32>) -> ()\n")
    return "module {\n" + PRINT_DECL + kernel + main + "    return\n  }\n}\n"


TILE = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [1, 1, 7] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
"""


VECTOR_WAYS = {
    "vector": "vector-width=16 block-q=16 block-kv=8",
    "vector8": "vector-width=8 block-q=8 block-kv=16 key-rows=3 pv-rows=4 "
               "pv-vectors=1",
}


def run_ways(name, text, kernel_text, workdir):
    ways = {}
    for way, opts in VECTOR_WAYS.items():
        kernel = fa_opt(FA_OPT, kernel_text,
                        [f"--fa-cpu-attention=require-kernel-form=true {opts}"],
                        workdir, f"{name}.{way}")
        if "fa.attention" in kernel:
            raise RuntimeError(f"{name}: fa-cpu-attention left the op")
        ways[way] = execute(FA_OPT, kernel, workdir, f"{name}.{way}.run",
                            ["--fa-lower-to-cpu"])
    ways["reference"] = execute(FA_OPT, text, workdir, name + ".ref",
                                ["--fa-lower-to-cpu=reference=1"])
    ways["tiled"] = execute(FA_OPT, text, workdir, name + ".tiled",
                            ["--fa-lower-to-cpu=block-q=8 block-kv=8"])
    lib = os.path.join(workdir, name + ".transform.mlir")
    with open(lib, "w") as f:
        f.write(TILE)
    tiled = fa_opt(FA_OPT, text,
                   ["--transform-preload-library=transform-library-paths=" +
                    lib, "--transform-interpreter", "--canonicalize", "--cse"],
                   workdir, name + ".tile")
    if "scf.forall" not in tiled:
        raise RuntimeError(f"{name}: no scf.forall after tiling")
    ways["tiling"] = execute(FA_OPT, tiled, workdir, name + ".tiling",
                             ["--fa-lower-to-cpu=block-q=4 block-kv=8"])
    return ways


def run_case(c, workdir):
    rng = np.random.default_rng(seed_of("modifiers." + c["name"]))
    a, text, clauses, attrs, refmods = build(c, rng)
    kernel_text = build_kernel_form(c, a, clauses, attrs)
    segs = (a["qs"], a["ks"]) if "qs" in a else None
    ref_o, ref_l, empty = reference(
        a["q"], a["k"], a["v"], 1.0 / np.sqrt(c["D"]), c["causal"],
        a.get("lens"), a.get("mask"), np.float64, window=c["window"],
        softcap=c["softcap"], alibi=a.get("alibi"), chunk=c["chunk"],
        segments=segs, q_offset=c["q_offset"], **refmods)
    failures = []
    for way, (o, lse) in run_ways(c["name"], text, kernel_text, workdir).items():
        failures += compare_outputs(f"{c['name']} [{way}]", o, lse, ref_o,
                                    ref_l, empty)
    return failures


def case(name, **kw):
    c = dict(name=name, B=1, Hq=2, Hkv=2, Nq=29, Nk=29, D=8, mag=1.0,
             causal="none", lens=None, mask=None, window=None, softcap=None,
             alibi=None, chunk=None, segments=None, q_offset=0,
             regions=None, block_mask=None)
    c.update(kw)
    return c


CASES = [
    # Windows alone, with both alignments, Nq != Nk and ragged tails.
    case("window_left_causal_br", Hq=4, Hkv=2, Nq=37, Nk=53,
         causal="bottom-right", window=(8, 0), lens=[45]),
    case("window_both_none", Nq=40, Nk=40, window=(5, 3)),
    case("window_left_only_tl_nq_gt_nk", B=2, Nq=40, Nk=24,
         causal="top-left", window=(4, -1), lens=[17, 100]),
    case("window_right_only_none", Nq=20, Nk=50, window=(-1, 2)),
    case("window_br_nq_gt_nk", Nq=40, Nk=24, causal="bottom-right",
         window=(6, 0)),
    # left = right = 0 with key lengths: rows past the length are empty.
    case("window_zero_lens_empty_rows", B=2, Nq=30, Nk=30, window=(0, 0),
         lens=[10, 30]),
    # Softcap on large scores (the cap binds) with an additive mask after.
    case("softcap_float_mask", Nq=33, Nk=41, mag=6.0, softcap=2.5,
         mask="float"),
    # ALiBi [Hq] and [B, Hq], both alignments.
    case("alibi_h_causal_br", Hq=4, Hkv=1, Nq=19, Nk=45,
         causal="bottom-right", alibi="h"),
    case("alibi_bh_none_nq_gt_nk", B=2, Nq=40, Nk=23, alibi="bh"),
    # Chunked attention (Llama 4).
    case("chunk_causal_br", Nq=45, Nk=45, causal="bottom-right", chunk=8),
    case("chunk_none_nq_gt_nk", Nq=40, Nk=24, chunk=16),
    # Document masks: sorted ids with empty documents, and unsorted ids.
    case("segments_sorted_causal_tl", B=2, Nq=37, Nk=37, causal="top-left",
         segments="sorted"),
    case("segments_random_lens", B=2, Nq=21, Nk=33, segments="random",
         lens=[30, 5]),
    # Sorted ids over many tiles: key tiles skipped (other documents), full
    # (one document) and partial, with a ragged tail and key lengths.
    case("segments_sorted_tiles", B=2, Nq=75, Nk=90, segments="sorted",
         lens=[90, 61]),
    # q_offset with a window and causality.
    case("q_offset_window_tl", Nq=20, Nk=40, causal="top-left",
         window=(5, -1), q_offset=7),
    case("q_offset_alibi_br", Nq=20, Nk=40, causal="bottom-right",
         alibi="h", q_offset=-3),
    # Everything together: window + softcap + ALiBi + GQA + key lengths.
    case("combined_br", B=2, Hq=4, Hkv=2, Nq=27, Nk=51,
         causal="bottom-right", window=(9, 0), softcap=3.0, alibi="bh",
         lens=[51, 40], mag=3.0),
    case("combined_tl_bool_mask", B=2, Hq=4, Hkv=1, Nq=35, Nk=30,
         causal="top-left", window=(7, -1), softcap=4.0, alibi="h",
         lens=[30, 19], mask="bool", chunk=12),
    # General regions (test/lib/modifier_regions.py): a relative-bias table
    # read at per-lane indices, with GQA, both alignments and ragged tails.
    case("score_mod_rel_bias_br", B=2, Hq=4, Hkv=2, Nq=27, Nk=45,
         causal="bottom-right", lens=[45, 31], regions="rel_bias"),
    case("score_mod_rel_bias_nq_gt_nk", Nq=40, Nk=23, regions="rel_bias"),
    # A table read whose lane-varying index is not the last (lane by lane
    # on the vector kernel), with key lengths.
    case("score_mod_row_bias", B=2, Nq=29, Nk=37, lens=[37, 20],
         regions="row_bias"),
    # ALiBi by hand, against the reference's own formula.
    case("score_mod_alibi_like", Hq=4, Hkv=1, Nq=33, Nk=33,
         causal="top-left", regions="alibi_like"),
    # A prefix-LM mask_mod; key lengths of 0 empty every row of batch 1.
    case("mask_mod_prefix_lm", B=2, Nq=35, Nk=35, lens=[35, 0],
         regions="prefix_lm"),
    # Both regions with window + softcap + ALiBi + segments + GQA.
    case("regions_combined", B=2, Hq=4, Hkv=2, Nq=37, Nk=41,
         causal="bottom-right", window=(11, 2), softcap=3.0, alibi="h",
         segments="sorted", mag=3.0, regions="both"),
    # Block masks built by fa.create_block_mask from the mask_mod: the
    # vector kernels skip empty tiles and skip the mask_mod on full ones
    # (prefix LM: full, partial and empty tiles; both: per head).
    case("block_mask_prefix_lm", B=2, Nq=53, Nk=61, lens=[61, 40],
         regions="prefix_lm", block_mask=(16, 8)),
    case("block_mask_both_window", B=2, Hq=4, Hkv=2, Nq=37, Nk=45,
         causal="bottom-right", window=(20, 3), regions="both",
         block_mask=(16, 16)),
    # top_left with Nq > Nk: the tiling pads keys, which the regions must
    # not read past Nk.
    case("regions_tl_padded_keys", Nq=40, Nk=24, causal="top-left",
         regions="both"),
    # Decode shapes: Nq x Hq/Hkv rows fit one decode tile (8 rows for
    # vector8, 16 for vector), so the vector ways run the decode kernel
    # (query heads packed per kv head; per-lane heads, slopes, positions
    # and segment ids).
    case("decode_gqa_window", B=2, Hq=8, Hkv=2, Nq=2, Nk=45,
         causal="bottom-right", window=(20, 0), lens=[45, 30]),
    case("decode_mods_regions", B=2, Hq=4, Hkv=1, Nq=2, Nk=37,
         causal="bottom-right", softcap=3.0, alibi="h", segments="sorted",
         mag=3.0, regions="both"),
    case("decode_mask_q_offset", Hq=4, Hkv=2, Nq=3, Nk=40,
         causal="top-left", mask="float", q_offset=5),
]


def mutate_window(kernel):
    mutants = {}
    m = re.search(r"scf\.if (%[\w]+) -> \(vector", kernel)
    if m:
        # A constant false defined at the top of @attn.
        body = kernel[:m.start(1)] + "%mutant_false" + kernel[m.end(1):]
        at = body.index("{", body.index("func.func @attn(")) + 1
        mutants["full_tiles"] = (body[:at] + "\n    %mutant_false = "
                                 "arith.constant false" + body[at:])
    cmp = re.search(r"arith\.cmpi sge, (%[\w]+, %[\w]+ : vector<16xindex>)",
                    kernel)
    if cmp:
        mutants["window_off_by_1"] = (kernel[:cmp.start()] + "arith.cmpi sgt, "
                                      + cmp.group(1) + kernel[cmp.end():])
    return mutants


def mutate_segments(kernel):
    # AttentionSemantics::segmentTileNeedsMask: qmin != qmax, kmin != kmax,
    # qmin != kmin (in this order); segmentTileVisited: kmax < qmin,
    # kmin > qmax.
    mutants = {}
    ne = list(re.finditer(r"arith\.cmpi ne, (%[\w]+), (%[\w]+) : i32",
                          kernel))
    if len(ne) >= 2:
        m = ne[1]
        mutants["segment_full"] = (kernel[:m.start()] + "arith.cmpi ne, " +
                                   m.group(1) + ", " + m.group(1) + " : i32" +
                                   kernel[m.end():])
    sgt = re.search(r"arith\.cmpi sgt, (%[\w]+, %[\w]+ : i32)", kernel)
    if sgt:
        mutants["segment_skip"] = (kernel[:sgt.start()] + "arith.cmpi sge, " +
                                   sgt.group(1) + kernel[sgt.end():])
    return mutants


def mutate_decode(kernel):
    # The decode kernel's row head kv_head * G + row % G: the first scalar
    # remui (the Q rows' heads) becomes a divui (the row's query index).
    mutants = {}
    m = re.search(r"arith\.remui (%[\w]+, %[\w]+ : index)", kernel)
    if m:
        mutants["decode_row_head"] = (kernel[:m.start()] + "arith.divui " +
                                      m.group(1) + kernel[m.end():])
    return mutants


MUTATIONS = [("window_both_none", mutate_window,
              ("full_tiles", "window_off_by_1")),
             ("decode_gqa_window", mutate_decode, ("decode_row_head",)),
             ("segments_sorted_tiles", mutate_segments,
              ("segment_full", "segment_skip"))]


def run_mutations(workdir):
    failures = []
    for case_name, mutate, names in MUTATIONS:
        c = next(x for x in CASES if x["name"] == case_name)
        rng = np.random.default_rng(seed_of("modifiers." + c["name"]))
        a, _, clauses, attrs, _ = build(c, rng)
        segs = (a["qs"], a["ks"]) if "qs" in a else None
        ref_o, _, empty = reference(
            a["q"], a["k"], a["v"], 1.0 / np.sqrt(c["D"]), c["causal"],
            a.get("lens"), None, np.float64, window=c["window"],
            segments=segs)
        kernel = fa_opt(FA_OPT, build_kernel_form(c, a, clauses, attrs),
                        ["--fa-cpu-attention=require-kernel-form=true " +
                         VECTOR_WAYS["vector"]], workdir, "mutant")
        mutants = mutate(kernel)
        for name in names:
            if name not in mutants:
                failures.append(f"mutation {name}: the pattern to edit is "
                                "gone")
                continue
            o, _ = execute(FA_OPT, mutants[name], workdir, "mutant." + name,
                           ["--fa-lower-to-cpu"])
            err = rel_err(o[~empty], ref_o[~empty])
            print(f"mutation {name}: O rel err {err:.2e} (must fail)")
            if err < 2e-5:
                failures.append(f"mutation {name} was not caught (O rel err "
                                f"{err:.2e})")
    return failures


def mutate_tiling(tiled):
    """The tiled op's score_mod without the query tile's origin added to
    its q index (the region then reads the bias of row q - q0)."""
    m = re.search(r"score_mod \{\s*\^bb0\(%\w+: f32, %\w+: index, "
                  r"%\w+: index, (%\w+): index", tiled)
    if not m:
        return None
    add = re.compile(r"arith\.addi " + re.escape(m.group(1)) +
                     r", %\w+ : index")
    hit = add.search(tiled, m.end())
    if not hit:
        return None
    return (tiled[:hit.start()] + f"arith.maxsi {m.group(1)}, {m.group(1)} "
            ": index" + tiled[hit.end():])


def run_tiling_mutation(workdir):
    """region_not_offset: the tiling way of score_mod_rel_bias_br with the
    q origin dropped from the tiled op's region must fail."""
    c = next(x for x in CASES if x["name"] == "score_mod_rel_bias_br")
    rng = np.random.default_rng(seed_of("modifiers." + c["name"]))
    a, text, _, _, refmods = build(c, rng)
    ref_o, _, empty = reference(
        a["q"], a["k"], a["v"], 1.0 / np.sqrt(c["D"]), c["causal"],
        a.get("lens"), None, np.float64, **refmods)
    lib = os.path.join(workdir, "mutant.transform.mlir")
    with open(lib, "w") as f:
        f.write(TILE)
    tiled = fa_opt(FA_OPT, text,
                   ["--transform-preload-library=transform-library-paths=" +
                    lib, "--transform-interpreter", "--canonicalize", "--cse"],
                   workdir, "mutant.tile")
    mutant = mutate_tiling(tiled)
    if mutant is None:
        return ["mutation region_not_offset: the pattern to edit is gone"]
    o, _ = execute(FA_OPT, mutant, workdir, "mutant.region",
                   ["--fa-lower-to-cpu=block-q=4 block-kv=8"])
    err = rel_err(o[~empty], ref_o[~empty])
    print(f"mutation region_not_offset: O rel err {err:.2e} (must fail)")
    if err < 2e-5:
        return [f"mutation region_not_offset was not caught (O rel err "
                f"{err:.2e})"]
    return []


def run_block_mask_mutation(workdir):
    """block_partial_full: fa.create_block_mask's encoding marks partial
    tiles full (the vector kernel then skips the mask_mod on them); the
    vector way of block_mask_prefix_lm must fail."""
    c = next(x for x in CASES if x["name"] == "block_mask_prefix_lm")
    rng = np.random.default_rng(seed_of("modifiers." + c["name"]))
    a, _, clauses, attrs, refmods = build(c, rng)
    ref_o, _, empty = reference(
        a["q"], a["k"], a["v"], 1.0 / np.sqrt(c["D"]), c["causal"],
        a.get("lens"), None, np.float64, **refmods)
    kernel = fa_opt(FA_OPT, build_kernel_form(c, a, clauses, attrs),
                    ["--fa-lower-block-mask",
                     "--fa-cpu-attention=require-kernel-form=true " +
                     VECTOR_WAYS["vector"]], workdir, "mutant.bm")
    m = re.search(r"arith\.select (%[\w]+), (%c2_i8), %c1_i8 : i8", kernel)
    if not m:
        return ["mutation block_partial_full: the pattern to edit is gone"]
    mutant = (kernel[:m.start()] + f"arith.select {m.group(1)}, %c2_i8, "
              "%c2_i8 : i8" + kernel[m.end():])
    o, _ = execute(FA_OPT, mutant, workdir, "mutant.bm.run",
                   ["--fa-lower-to-cpu"])
    err = rel_err(o[~empty], ref_o[~empty])
    print(f"mutation block_partial_full: O rel err {err:.2e} (must fail)")
    if err < 2e-5:
        return [f"mutation block_partial_full was not caught (O rel err "
                f"{err:.2e})"]
    return []


def main():
    failures = []
    with tempfile.TemporaryDirectory() as w:
        for c in CASES:
            if ONLY and not any(s in c["name"] for s in ONLY):
                continue
            failures += run_case(c, w)
        if not ONLY:
            failures += run_mutations(w)
            failures += run_tiling_mutation(w)
            failures += run_block_mask_mutation(w)
    finish(failures)


if __name__ == "__main__":
    main()
