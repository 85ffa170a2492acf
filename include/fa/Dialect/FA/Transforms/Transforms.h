//===- Transforms.h - fa rewrite patterns -----------------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The patterns behind fa's passes, for embedding in other pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_TRANSFORMS_TRANSFORMS_H
#define FA_DIALECT_FA_TRANSFORMS_TRANSFORMS_H

#include <cstdint>

namespace mlir {
class DialectRegistry;
class RewritePatternSet;
namespace fa {

/// Tile sizes of the online-softmax attention lowering.
struct AttentionTileSizes {
  int64_t blockQ = 64;
  int64_t blockKV = 64;
};

/// fa.attention -> scf.forall over (B, Hq, query tiles) around an scf.for
/// over key/value tiles carrying (m, l, acc).
void populateFATileAttentionPatterns(RewritePatternSet &patterns,
                                     AttentionTileSizes sizes);

void populateFATileAttentionBackwardPatterns(RewritePatternSet &patterns,
                                             AttentionTileSizes sizes);

/// fa.softmax -> two-sweep online softmax with row tiles of `tileSize`.
void populateFAOnlineSoftmaxPatterns(RewritePatternSet &patterns,
                                     int64_t tileSize);

/// fa.attention and fa.softmax -> the naive computation on full tensors.
void populateFADecomposeReferencePatterns(RewritePatternSet &patterns);

/// fa.create_block_mask to linalg on tensors (fa-lower-block-mask).
void populateFALowerBlockMaskPatterns(RewritePatternSet &patterns);

/// fa.merge to linalg on tensors (fa-lower-merge).
void populateFALowerMergePatterns(RewritePatternSet &patterns);

/// Options of the raising patterns.
struct RaiseAttentionOptions {
  /// Also raise chains with a mask. fa.attention gives O = 0 for a query row
  /// whose keys are all masked where the naive chain gives NaN.
  bool allowMaskedRows = true;
  /// Emit a remark on an attention raised with a boolean mask where the
  /// chain compared indices in a way no causal alignment expresses.
  bool reportMissed = false;
};

/// Attention written in linalg (Q.K^T, optional constant scale and mask,
/// last-dim softmax or its decomposition, P.V) -> one fa.attention.
void populateRaiseAttentionPatterns(RewritePatternSet &patterns,
                                    RaiseAttentionOptions options = {});

/// Attaches TilingInterface external models to fa.attention (parallel dims
/// B, Hq, Nq) and fa.softmax (every dim but the normalized one parallel).
void registerTilingInterfaceExternalModels(DialectRegistry &registry);

} // namespace fa
} // namespace mlir

#endif // FA_DIALECT_FA_TRANSFORMS_TRANSFORMS_H
