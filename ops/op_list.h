// The one registry of primitives, by family: X(Struct) for every primitive struct
// tapeflow::prims::Struct whose CUDA kernel belongs in ops/cuda/. Until a family's CUDA kernels
// exist, ops/no_cuda/<family>.cpp defines its eval_cuda as an UnimplementedError naming the op.
// Host-only primitives (views, copies, printing) define both kernels in host code.
#pragma once

#define TF_UNARY_PRIMITIVES(X)                                                                 \
  X(Negative)                                                                                  \
  X(Abs) X(Sign) X(Exp) X(Log) X(Log1p) X(Sqrt) X(Rsqrt) X(Square) X(Tanh) X(Sigmoid) X(Sin)   \
      X(Cos) X(Erf) X(Erfc) X(Softsign) X(Floor) X(Ceil) X(Round) X(LogicalNot) X(Tan) X(Asin) \
          X(Acos) X(Atan) X(Sinh) X(Cosh) X(Asinh) X(Acosh) X(Atanh) X(Expm1) X(Cast) X(Invert)
#define TF_BINARY_PRIMITIVES(X)                                                                   \
  X(Add)                                                                                          \
  X(Subtract) X(Multiply) X(Divide) X(Pow) X(Maximum) X(Minimum) X(FloorDiv) X(FloorMod) X(Equal) \
      X(NotEqual) X(Less) X(LessEqual) X(Greater) X(GreaterEqual) X(LogicalAnd) X(LogicalOr)      \
          X(Select) X(Atan2) X(BitwiseAnd) X(BitwiseOr) X(BitwiseXor) X(LeftShift) X(RightShift)
#define TF_REDUCE_PRIMITIVES(X) \
  X(ReduceSum) X(ReduceProd) X(ReduceMax) X(ReduceMin) X(ArgMax) X(ArgMin)
#define TF_MOVEMENT_PRIMITIVES(X) \
  X(Transpose) X(BroadcastTo) X(Slice) X(Concat) X(Pad) X(Gather)
// Inclusive / exclusive, forward / reverse running sums, products and log-sum-exps along one
// axis.
#define TF_SCAN_PRIMITIVES(X) X(Cumsum) X(Cumprod) X(CumulativeLogsumexp)
#define TF_LINALG_PRIMITIVES(X) X(MatMul) X(MatrixInverse) X(MatrixSolve) X(MatrixDeterminant)
// triangular_solve, slogdet, lu and tridiagonal_solve (ops/linalg_more.h).
#define TF_LINALG_MORE_PRIMITIVES(X) \
  X(MatrixTriangularSolve) X(LogMatrixDeterminant) X(Lu) X(TridiagonalSolve)
#define TF_NN_PRIMITIVES(X) X(Conv2D) X(MaxPool2D) X(AvgPool2D)
// Depthwise convolution and its two gradients (ops/depthwise.h).
#define TF_DEPTHWISE_PRIMITIVES(X) \
  X(DepthwiseConv2D) X(DepthwiseConv2DBackpropInput) X(DepthwiseConv2DBackpropFilter)
// conv3d and its two gradients (ops/conv3d.h).
#define TF_CONV3D_PRIMITIVES(X) X(Conv3D) X(Conv3DBackpropInput) X(Conv3DBackpropFilter)
#define TF_RANDOM_PRIMITIVES(X) X(RandomNormal) X(RandomUniform)
// Gradient kernels (used by vjps): backward convolution and pooling, segment sums for gather.
#define TF_NN_GRAD_PRIMITIVES(X) \
  X(Conv2DBackpropInput)         \
  X(Conv2DBackpropFilter) X(MaxPool2DGrad) X(MaxPool2DGradGrad) X(AvgPool2DGrad)
#define TF_SCATTER_PRIMITIVES(X) X(UnsortedSegmentSum) X(ScatterRowsUpdate)
// unsorted_segment_max/min/prod (and integer sums) (ops/segment.h).
#define TF_SEGMENT_PRIMITIVES(X) X(UnsortedSegmentReduce)
// lgamma, digamma, polygamma, erfinv, ndtri, xlogy, ..., igamma (ops/special.h).
#define TF_SPECIAL_PRIMITIVES(X) X(Special)
#define TF_ACTIVATION_PRIMITIVES(X) X(Relu) X(ReluGrad)
// Fused row kernels (softmax, log_softmax, sparse softmax cross-entropy); each names its
// composite fallback in ops/loss.h.
#define TF_LOSS_PRIMITIVES(X) \
  X(Softmax) X(LogSoftmax) X(SparseSoftmaxCrossEntropy) X(SparseSoftmaxCrossEntropyGrad)

// TF's ImageProjectiveTransformV3 and CropAndResize with its two gradients (ops/image.h).
#define TF_IMAGE_PRIMITIVES(X) \
  X(ImageProjectiveTransform) X(CropAndResize) X(CropAndResizeGradImage) X(CropAndResizeGradBoxes)
// cholesky, eigh/eigvalsh, qr, svd (ops/linalg_decomp.h).
#define TF_LINALG_DECOMP_PRIMITIVES(X) X(Cholesky) X(SelfAdjointEig) X(Qr) X(Svd)
// top_k (sort and argsort go through it) and searchsorted (ops/sort.h).
#define TF_SORT_PRIMITIVES(X) X(TopK) X(SearchSorted)
// tf.nn.ctc_loss's fused loss and gradient (ops/nn_more.h).
#define TF_CTC_PRIMITIVES(X) X(CtcLoss)
// fft/ifft, rfft and irfft over the innermost axis (ops/signal.h).
#define TF_SIGNAL_PRIMITIVES(X) X(Fft) X(Rfft) X(Irfft)
// to_hash_bucket_fast/strong and cross_hashed (ops/hash.h).
#define TF_HASH_PRIMITIVES(X) X(HashBucket) X(HashCross)
// tf.linalg.sqrtm and its gradient (ops/sqrtm.h).
#define TF_SQRTM_PRIMITIVES(X) X(MatrixSquareRoot) X(MatrixSquareRootGrad)

// clang-format off (one family list per line, by hand)
#define TF_PRIMITIVES(X)                                                                      \
  TF_UNARY_PRIMITIVES(X) TF_BINARY_PRIMITIVES(X) TF_REDUCE_PRIMITIVES(X)                      \
  TF_MOVEMENT_PRIMITIVES(X) TF_LINALG_PRIMITIVES(X) TF_NN_PRIMITIVES(X) TF_RANDOM_PRIMITIVES(X) \
  TF_NN_GRAD_PRIMITIVES(X) TF_SCATTER_PRIMITIVES(X) TF_ACTIVATION_PRIMITIVES(X)             \
  TF_LOSS_PRIMITIVES(X) TF_SCAN_PRIMITIVES(X) TF_IMAGE_PRIMITIVES(X) TF_DEPTHWISE_PRIMITIVES(X) \
  TF_LINALG_MORE_PRIMITIVES(X) TF_LINALG_DECOMP_PRIMITIVES(X) TF_SORT_PRIMITIVES(X)          \
  TF_SEGMENT_PRIMITIVES(X) TF_SPECIAL_PRIMITIVES(X) TF_CTC_PRIMITIVES(X)                     \
  TF_SIGNAL_PRIMITIVES(X) TF_CONV3D_PRIMITIVES(X) TF_HASH_PRIMITIVES(X) TF_SQRTM_PRIMITIVES(X)
// clang-format on

// Both kernels in host code.
#define TF_HOST_PRIMITIVES(X) X(Reshape) X(Copy) X(Print) X(AssertThat)
