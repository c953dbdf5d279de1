// Ops whose shape functions use InferenceContext beyond UnchangedShape:
// WithRank, Merge, dim arithmetic, input_tensor, the common shape functions.
#define EIGEN_USE_THREADS

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;
typedef Eigen::ThreadPoolDevice CPUDevice;
using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

// [n, k1] and [n, k2] -> [n, k1 + k2]: the rows side by side.
REGISTER_OP("PairConcat")
    .Attr("T: {float, double, int32}")
    .Input("a: T")
    .Input("b: T")
    .Output("c: T")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle a, b;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &a));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &b));
      DimensionHandle rows;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(a, 0), c->Dim(b, 0), &rows));
      DimensionHandle cols;
      TF_RETURN_IF_ERROR(c->Add(c->Dim(a, 1), c->Dim(b, 1), &cols));
      c->set_output(0, c->Matrix(rows, cols));
      return OkStatus();
    });

template <typename T>
class PairConcatOp : public OpKernel {
 public:
  explicit PairConcatOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(a.shape()) && TensorShapeUtils::IsMatrix(b.shape()),
                errors::InvalidArgument("PairConcat needs matrices, got ", a.shape().DebugString(),
                                        " and ", b.shape().DebugString()));
    OP_REQUIRES(ctx, a.dim_size(0) == b.dim_size(0),
                errors::InvalidArgument("PairConcat: ", a.dim_size(0), " rows and ",
                                        b.dim_size(0), " rows"));
    const int64 n = a.dim_size(0), k1 = a.dim_size(1), k2 = b.dim_size(1);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n, k1 + k2}), &out));
    auto am = a.matrix<T>();
    auto bm = b.matrix<T>();
    auto om = out->matrix<T>();
    for (int64 i = 0; i < n; ++i) {
      for (int64 j = 0; j < k1; ++j) om(i, j) = am(i, j);
      for (int64 j = 0; j < k2; ++j) om(i, k1 + j) = bm(i, j);
    }
  }
};

#define REGISTER(T) \
  REGISTER_KERNEL_BUILDER(Name("PairConcat").Device(DEVICE_CPU).TypeConstraint<T>("T"), PairConcatOp<T>);
REGISTER(float)
REGISTER(double)
REGISTER(int32)
#undef REGISTER

// x: [k], rows: int32 scalar -> [rows, k]: x repeated; the row count is
// known to the shape function when `rows` is a constant.
REGISTER_OP("RepeatRows")
    .Input("x: float")
    .Input("rows: int32")
    .Output("y: float")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x, rows;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &rows));
      const Tensor* r = c->input_tensor(1);
      DimensionHandle n = c->UnknownDim();
      if (r != nullptr) {
        const int32 v = r->scalar<int32>()();
        if (v < 0) return errors::InvalidArgument("rows must be >= 0, got ", v);
        n = c->MakeDim(v);
      }
      c->set_output(0, c->Matrix(n, c->Dim(x, 0)));
      return OkStatus();
    });

class RepeatRowsOp : public OpKernel {
 public:
  explicit RepeatRowsOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& rows = ctx->input(1);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(rows.shape()),
                errors::InvalidArgument("rows must be a scalar, got ", rows.shape().DebugString()));
    const int32 n = rows.scalar<int32>()();
    OP_REQUIRES(ctx, n >= 0, errors::InvalidArgument("rows must be >= 0, got ", n));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n, x.dim_size(0)}), &out));
    auto xv = x.vec<float>();
    auto o = out->matrix<float>();
    for (int32 i = 0; i < n; ++i)
      for (int64 j = 0; j < x.dim_size(0); ++j) o(i, j) = xv(j);
  }
};
REGISTER_KERNEL_BUILDER(Name("RepeatRows").Device(DEVICE_CPU).HostMemory("rows"), RepeatRowsOp);

// [..., k] -> [...]: the shape function is Subshape; the kernel below in
// eigen.cc-style expressions lives in this file too.
REGISTER_OP("LastDimSum")
    .Attr("T: {float, double}")
    .Input("x: T")
    .Output("y: T")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x, y;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &x));
      TF_RETURN_IF_ERROR(c->Subshape(x, 0, -1, &y));
      c->set_output(0, y);
      return OkStatus();
    });

template <typename T>
class LastDimSumOp : public OpKernel {
 public:
  explicit LastDimSumOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES(ctx, x.dims() >= 1, errors::InvalidArgument("x must have rank >= 1"));
    TensorShape out_shape = x.shape();
    out_shape.RemoveLastDims(1);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &y));
    Eigen::array<Eigen::Index, 1> last{1};
    y->flat<T>().device(ctx->eigen_device<CPUDevice>()) =
        x.flat_inner_dims<T>().sum(last);
  }
};
REGISTER_KERNEL_BUILDER(Name("LastDimSum").Device(DEVICE_CPU).TypeConstraint<float>("T"),
                        LastDimSumOp<float>);
REGISTER_KERNEL_BUILDER(Name("LastDimSum").Device(DEVICE_CPU).TypeConstraint<double>("T"),
                        LastDimSumOp<double>);

// Broadcasting through the common shape function.
REGISTER_OP("BroadcastMax")
    .Attr("T: {float, int32}")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .SetShapeFn(shape_inference::BroadcastBinaryOpShapeFn);
