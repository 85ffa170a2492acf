// The kernel form: what fa-lower-to-nvvm, fa-compile and fa-emulate take
// (examples/attention.mlir is the tensor form, which fa-lower-to-cpu also
// takes). A kernel is a func.func whose memref arguments are the operands and
// the destinations: each operand enters through `bufferization.to_tensor ...
// restrict`, each result leaves through `materialize_in_destination` into a
// `restrict writable` destination, and nothing else uses the results.
// `fa-compile --emit-mlir` writes this form for any kernel spec.

// Grouped-query attention with bottom-right causality, per-batch key lengths
// and the log-sum-exp (the attention of examples/attention.mlir): 8 query
// heads share 2 key/value heads, head dim 64, B, Nq and Nk dynamic.
func.func @attention(%q: memref<?x8x?x64xf16>, %k: memref<?x2x?x64xf16>,
                     %v: memref<?x2x?x64xf16>, %lens: memref<?xi32>,
                     %o: memref<?x8x?x64xf16>, %lse: memref<?x8x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x64xf16> to tensor<?x8x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x64xf16> to tensor<?x8x?x64xf16>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x8x?xf32> to tensor<?x8x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
           kv_lens(%lt : tensor<?xi32>)
           outs(%ot : tensor<?x8x?x64xf16>, %st : tensor<?x8x?xf32>)
           causal(bottom_right)
           -> tensor<?x8x?x64xf16>, tensor<?x8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x?x64xf16>, memref<?x8x?x64xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x8x?xf32>, memref<?x8x?xf32>) -> ()
  return
}

// A boolean mask broadcast over the batch, passed as bytes (nonzero =
// attend) as C, NumPy and the runtime pass it, and turned into i1 inside.
func.func @masked(%q: memref<?x4x?x64xbf16>, %k: memref<?x4x?x64xbf16>,
                  %v: memref<?x4x?x64xbf16>, %m: memref<1x4x?x?xi8>,
                  %o: memref<?x4x?x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %mt = bufferization.to_tensor %m restrict : memref<1x4x?x?xi8> to tensor<1x4x?x?xi8>
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %nq = tensor.dim %mt, %c2 : tensor<1x4x?x?xi8>
  %nk = tensor.dim %mt, %c3 : tensor<1x4x?x?xi8>
  %e = tensor.empty(%nq, %nk) : tensor<1x4x?x?xi1>
  %keep = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                                           affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                          iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%mt : tensor<1x4x?x?xi8>) outs(%e : tensor<1x4x?x?xi1>) {
  ^bb0(%in: i8, %out: i1):
    %zero = arith.constant 0 : i8
    %ne = arith.cmpi ne, %in, %zero : i8
    linalg.yield %ne : i1
  } -> tensor<1x4x?x?xi1>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>)
         mask(%keep : tensor<1x4x?x?xi1>) outs(%ot : tensor<?x4x?x64xbf16>) -> tensor<?x4x?x64xbf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x4x?x64xbf16>, memref<?x4x?x64xbf16>) -> ()
  return
}
