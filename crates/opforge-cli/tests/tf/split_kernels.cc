// The kernel of split_ops.cc's op, in a file of its own.
#include "tensorflow/core/framework/op_kernel.h"

using namespace tensorflow;

template <typename T>
class NegatedOp : public OpKernel {
 public:
  explicit NegatedOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    y->flat<T>() = -x.flat<T>();
  }
};
REGISTER_KERNEL_BUILDER(Name("Negated").Device(DEVICE_CPU).TypeConstraint<float>("T"),
                        NegatedOp<float>);
REGISTER_KERNEL_BUILDER(Name("Negated").Device(DEVICE_CPU).TypeConstraint<int32>("T"),
                        NegatedOp<int32>);
