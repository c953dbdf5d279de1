// The variants of ZeroOut in TensorFlow's custom-op guide, written as the
// guide writes them (one library, so each variant has a name of its own):
// a type-polymorphic kernel with TypeConstraint, an attr checked with
// OP_REQUIRES, a list input `N * T`, and a `list(type)` attr.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("ZeroOutPoly")
    .Attr("T: {float, int32}")
    .Input("to_zero: T")
    .Output("zeroed: T")
    .SetShapeFn(shape_inference::UnchangedShape)
    .Doc(R"doc(
Zeros all but the first element of a tensor.

to_zero: any float or int32 tensor.
zeroed: its first element, then zeros.
)doc");

template <typename T>
class ZeroOutPolyOp : public OpKernel {
 public:
  explicit ZeroOutPolyOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input_tensor = context->input(0);
    auto input = input_tensor.flat<T>();
    Tensor* output = NULL;
    OP_REQUIRES_OK(context, context->allocate_output(0, input_tensor.shape(), &output));
    auto output_flat = output->template flat<T>();
    const int N = input.size();
    for (int i = 1; i < N; i++) output_flat(i) = 0;
    if (N > 0) output_flat(0) = input(0);
  }
};

REGISTER_KERNEL_BUILDER(
    Name("ZeroOutPoly").Device(DEVICE_CPU).TypeConstraint<int32>("T"),
    ZeroOutPolyOp<int32>);
REGISTER_KERNEL_BUILDER(
    Name("ZeroOutPoly").Device(DEVICE_CPU).TypeConstraint<float>("T"),
    ZeroOutPolyOp<float>);

REGISTER_OP("ZeroOutPreserve")
    .Attr("preserve_index: int = 0")
    .Input("to_zero: int32")
    .Output("zeroed: int32")
    .SetShapeFn(shape_inference::UnchangedShape);

class ZeroOutPreserveOp : public OpKernel {
 public:
  explicit ZeroOutPreserveOp(OpKernelConstruction* context) : OpKernel(context) {
    // Get the index of the value to preserve
    OP_REQUIRES_OK(context, context->GetAttr("preserve_index", &preserve_index_));
    // Check that preserve_index is positive
    OP_REQUIRES(context, preserve_index_ >= 0,
                errors::InvalidArgument("Need preserve_index >= 0, got ", preserve_index_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& input_tensor = context->input(0);
    auto input = input_tensor.flat<int32>();
    // Check that preserve_index is in range
    OP_REQUIRES(context, preserve_index_ < input.dimension(0),
                errors::InvalidArgument("preserve_index out of range"));
    Tensor* output_tensor = NULL;
    OP_REQUIRES_OK(context, context->allocate_output(0, input_tensor.shape(), &output_tensor));
    auto output_flat = output_tensor->template flat<int32>();
    const int N = input.size();
    for (int i = 0; i < N; i++) output_flat(i) = 0;
    output_flat(preserve_index_) = input(preserve_index_);
  }

 private:
  int preserve_index_;
};

REGISTER_KERNEL_BUILDER(Name("ZeroOutPreserve").Device(DEVICE_CPU), ZeroOutPreserveOp);

REGISTER_OP("ZeroOutList")
    .Attr("N: int >= 1")
    .Attr("T: {float, int32}")
    .Input("to_zero: N * T")
    .Output("zeroed: N * T")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      std::vector<shape_inference::ShapeHandle> shapes;
      TF_RETURN_IF_ERROR(c->input("to_zero", &shapes));
      return c->set_output("zeroed", shapes);
    });

template <typename T>
class ZeroOutListOp : public OpKernel {
 public:
  explicit ZeroOutListOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    OpInputList inputs;
    OP_REQUIRES_OK(context, context->input_list("to_zero", &inputs));
    OpOutputList outputs;
    OP_REQUIRES_OK(context, context->output_list("zeroed", &outputs));
    for (int k = 0; k < inputs.size(); ++k) {
      const Tensor& in = inputs[k];
      Tensor* out = nullptr;
      OP_REQUIRES_OK(context, outputs.allocate(k, in.shape(), &out));
      auto i = in.flat<T>();
      auto o = out->template flat<T>();
      o.setZero();
      if (i.size() > 0) o(0) = i(0);
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("ZeroOutList").Device(DEVICE_CPU).TypeConstraint<int32>("T"),
                        ZeroOutListOp<int32>);
REGISTER_KERNEL_BUILDER(Name("ZeroOutList").Device(DEVICE_CPU).TypeConstraint<float>("T"),
                        ZeroOutListOp<float>);

// A list(type) attr: each input keeps its first element, in its own dtype.
REGISTER_OP("ZeroOutTypes")
    .Attr("T: list({float, double, int32, int64})")
    .Input("to_zero: T")
    .Output("zeroed: T")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return OkStatus();
    });

class ZeroOutTypesOp : public OpKernel {
 public:
  explicit ZeroOutTypesOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("T", &types_));
    OP_REQUIRES(context, static_cast<int>(types_.size()) == context->num_inputs(),
                errors::Internal("T has ", types_.size(), " types for ",
                                 context->num_inputs(), " inputs"));
  }

  template <typename T>
  static void Zero(const Tensor& in, Tensor* out) {
    auto i = in.flat<T>();
    auto o = out->flat<T>();
    o.setZero();
    if (i.size() > 0) o(0) = i(0);
  }

  void Compute(OpKernelContext* context) override {
    for (int k = 0; k < context->num_inputs(); ++k) {
      const Tensor& in = context->input(k);
      Tensor* out = nullptr;
      OP_REQUIRES_OK(context, context->allocate_output(k, in.shape(), &out));
      switch (types_[k]) {
        case DT_FLOAT: Zero<float>(in, out); break;
        case DT_DOUBLE: Zero<double>(in, out); break;
        case DT_INT32: Zero<int32>(in, out); break;
        case DT_INT64: Zero<int64>(in, out); break;
        default:
          context->SetStatus(errors::InvalidArgument("unsupported type ",
                                                     DataTypeString(types_[k])));
          return;
      }
    }
  }

 private:
  DataTypeVector types_;
};

REGISTER_KERNEL_BUILDER(Name("ZeroOutTypes").Device(DEVICE_CPU), ZeroOutTypesOp);
