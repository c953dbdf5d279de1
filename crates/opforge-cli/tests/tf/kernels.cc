// Kernels as TensorFlow sources write them: Eigen tensor expressions on the
// ThreadPoolDevice, Shard over the worker threads, allocate_temp,
// forward_input_or_allocate_output, set_output of an input, and a misuse the
// layer turns into a clean error.
#define EIGEN_USE_THREADS

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/register_types.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

using namespace tensorflow;
typedef Eigen::ThreadPoolDevice CPUDevice;

// y = x * scale + shift, an Eigen expression on the device.
REGISTER_OP("ScaleShift")
    .Attr("T: {half, float, double}")
    .Attr("scale: float")
    .Attr("shift: float = 0")
    .Input("x: T")
    .Output("y: T")
    .SetShapeFn(shape_inference::UnchangedShape);

template <typename T>
class ScaleShiftOp : public OpKernel {
 public:
  explicit ScaleShiftOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("scale", &scale_));
    OP_REQUIRES_OK(c, c->GetAttr("shift", &shift_));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    const CPUDevice& d = ctx->eigen_device<CPUDevice>();
    y->flat<T>().device(d) =
        x.flat<T>() * static_cast<T>(scale_) + x.flat<T>().constant(static_cast<T>(shift_));
  }

 private:
  float scale_, shift_;
};

#define REGISTER_CPU(T) \
  REGISTER_KERNEL_BUILDER(Name("ScaleShift").Device(DEVICE_CPU).TypeConstraint<T>("T"), ScaleShiftOp<T>);
TF_CALL_half(REGISTER_CPU);
TF_CALL_float(REGISTER_CPU);
TF_CALL_double(REGISTER_CPU);
#undef REGISTER_CPU

// Row-wise mean and max of a matrix (Eigen reductions), two outputs.
REGISTER_OP("RowStats")
    .Input("x: float")
    .Output("mean: float")
    .Output("max: float")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &x));
      c->set_output(0, c->Vector(c->Dim(x, 0)));
      c->set_output(1, c->Vector(c->Dim(x, 0)));
      return OkStatus();
    });

class RowStatsOp : public OpKernel {
 public:
  explicit RowStatsOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(x.shape()),
                errors::InvalidArgument("x must be a matrix, got shape ", x.shape().DebugString()));
    OP_REQUIRES(ctx, x.dim_size(1) > 0, errors::InvalidArgument("x has no columns"));
    Tensor* mean = nullptr;
    Tensor* max = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({x.dim_size(0)}), &mean));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({x.dim_size(0)}), &max));
    const CPUDevice& d = ctx->eigen_device<CPUDevice>();
    Eigen::array<int, 1> cols{1};
    mean->vec<float>().device(d) = x.matrix<float>().mean(cols);
    max->vec<float>().device(d) = x.matrix<float>().maximum(cols);
  }
};
REGISTER_KERNEL_BUILDER(Name("RowStats").Device(DEVICE_CPU), RowStatsOp);

// y = x * x, sharded over the worker threads with Shard.
REGISTER_OP("ShardSquare")
    .Input("x: double")
    .Output("y: double")
    .Output("shards: int32")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->Scalar());
      return OkStatus();
    });

class ShardSquareOp : public OpKernel {
 public:
  explicit ShardSquareOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    Tensor* shards = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({}), &shards));
    auto in = x.flat<double>();
    auto out = y->flat<double>();
    std::atomic<int> count{0};
    auto work = [&](int64 begin, int64 end) {
      count++;
      for (int64 i = begin; i < end; ++i) out(i) = in(i) * in(i);
    };
    auto worker_threads = *(ctx->device()->tensorflow_cpu_worker_threads());
    Shard(worker_threads.num_threads, worker_threads.workers, in.size(), /*cost_per_unit=*/1000,
          work);
    shards->scalar<int32>()() = count.load();
  }
};
REGISTER_KERNEL_BUILDER(Name("ShardSquare").Device(DEVICE_CPU), ShardSquareOp);

// y = x + 1, in x's buffer when the runtime allows it.
REGISTER_OP("AddOneInPlace")
    .Input("x: float")
    .Output("y: float")
    .Output("forwarded: bool")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->Scalar());
      return OkStatus();
    });

class AddOneInPlaceOp : public OpKernel {
 public:
  explicit AddOneInPlaceOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = nullptr;
    int forwarded = -1;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({0}, 0, x.shape(), &y, &forwarded));
    y->flat<float>() = ctx->input(0).flat<float>() + 1.0f;
    Tensor* f = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({}), &f));
    f->scalar<bool>()() = forwarded == 0;
  }
};
REGISTER_KERNEL_BUILDER(Name("AddOneInPlace").Device(DEVICE_CPU), AddOneInPlaceOp);

// Cumulative sums computed in a temporary, then made the output; the
// second output is the input itself.
REGISTER_OP("CumsumTemp")
    .Attr("T: {float, int64}")
    .Input("x: T")
    .Output("sums: T")
    .Output("same: T")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &x));
      c->set_output(0, x);
      c->set_output(1, x);
      return OkStatus();
    });

template <typename T>
class CumsumTempOp : public OpKernel {
 public:
  explicit CumsumTempOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsVector(x.shape()),
                errors::InvalidArgument("x must be a vector"));
    Tensor sums;
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(DataTypeToEnum<T>::value, x.shape(), &sums));
    auto in = x.vec<T>();
    auto s = sums.vec<T>();
    T acc = T(0);
    for (int64 i = 0; i < in.size(); ++i) {
      acc += in(i);
      s(i) = acc;
    }
    ctx->set_output(0, sums);
    ctx->set_output(1, x);
  }
};
REGISTER_KERNEL_BUILDER(Name("CumsumTemp").Device(DEVICE_CPU).TypeConstraint<float>("T"),
                        CumsumTempOp<float>);
REGISTER_KERNEL_BUILDER(Name("CumsumTemp").Device(DEVICE_CPU).TypeConstraint<int64>("T"),
                        CumsumTempOp<int64>);

// Misuse a TensorFlow kernel would crash the process on: reading an int32
// input as float (a failed CHECK in TensorFlow), or a C++ exception.
REGISTER_OP("Misuse")
    .Attr("how: {'wrong_type', 'throw', 'bad_index'}")
    .Input("x: int32")
    .Output("y: int32")
    .SetShapeFn(shape_inference::UnchangedShape);

class MisuseOp : public OpKernel {
 public:
  explicit MisuseOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("how", &how_));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    if (how_ == "wrong_type") {
      auto f = x.flat<float>();
      (void)f;
    } else if (how_ == "throw") {
      throw std::runtime_error("the kernel threw");
    } else {
      const Tensor& none = ctx->input(7);
      (void)none;
    }
    ctx->set_output(0, x);
  }

 private:
  std::string how_;
};
REGISTER_KERNEL_BUILDER(Name("Misuse").Device(DEVICE_CPU), MisuseOp);

// Strings in and out: each element repeated `times` times, and its length.
REGISTER_OP("RepeatString")
    .Attr("times: int >= 0")
    .Input("x: string")
    .Output("y: string")
    .Output("len: int64")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->input(0));
      return OkStatus();
    });

class RepeatStringOp : public OpKernel {
 public:
  explicit RepeatStringOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("times", &times_));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = nullptr;
    Tensor* len = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, x.shape(), &len));
    auto in = x.flat<tstring>();
    auto out = y->flat<tstring>();
    auto n = len->flat<int64>();
    for (int64 i = 0; i < in.size(); ++i) {
      std::string v(in(i));
      std::string r;
      for (int k = 0; k < times_; ++k) r += v;
      out(i) = r;
      n(i) = static_cast<int64>(r.size());
    }
  }

 private:
  int times_;
};
REGISTER_KERNEL_BUILDER(Name("RepeatString").Device(DEVICE_CPU), RepeatStringOp);
