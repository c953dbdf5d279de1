// A gradient registered as TensorFlow C++ registers one: REGISTER_OP_GRADIENT
// with a FunctionDefHelper body computed from the node's attrs.
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

REGISTER_OP("Cube")
    .Attr("T: {float, double}")
    .Input("x: T")
    .Output("y: T")
    .SetShapeFn(shape_inference::UnchangedShape);

template <typename T>
class CubeOp : public OpKernel {
 public:
  explicit CubeOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    y->flat<T>() = x.flat<T>().cube();
  }
};
REGISTER_KERNEL_BUILDER(Name("Cube").Device(DEVICE_CPU).TypeConstraint<float>("T"), CubeOp<float>);
REGISTER_KERNEL_BUILDER(Name("Cube").Device(DEVICE_CPU).TypeConstraint<double>("T"), CubeOp<double>);

typedef FunctionDefHelper FDH;

// dy/dx of x^3 is 3 x^2.
Status CubeGrad(const AttrSlice& attrs, FunctionDef* g) {
  DataType T;
  TF_RETURN_IF_ERROR(GetNodeAttr(attrs, "T", &T));
  // clang-format off
  *g = FDH::Define(
      // Arg defs
      {"x: T", "dy: T"},
      // Ret val defs
      {"dx: T"},
      // Attr defs
      {{"T: {float, double}"}},
      // Nodes
      {
        FDH::Const("c", int64{3}),
        {{"three"}, "Cast", {"c"}, {{"SrcT", DT_INT64}, {"DstT", T}}},
        {{"x2"}, "Square", {"x"}, {{"T", "$T"}}},
        {{"x2_3"}, "Mul", {"x2", "three:y:0"}, {{"T", "$T"}}},
        {{"dx"}, "Mul", {"dy", "x2_3"}, {{"T", "$T"}}},
      });
  // clang-format on
  return OkStatus();
}
REGISTER_OP_GRADIENT("Cube", CubeGrad);

}  // namespace tensorflow
