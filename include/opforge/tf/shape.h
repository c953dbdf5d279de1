/* opforge's TensorFlow C++ layer: InferenceContext and the common shape
 * functions. See opforge/tf/base.h. */
#ifndef OPFORGE_TF_SHAPE_H_
#define OPFORGE_TF_SHAPE_H_

#include <opforge/tf/tensor.h>

#include <deque>

namespace tensorflow {
namespace shape_inference {

class InferenceContext;

/** A shape of one shape-function call (TensorFlow's ShapeHandle): a host
 *  handle, with the context it belongs to (so the static queries work). */
class ShapeHandle {
 public:
  ShapeHandle() = default;
  bool IsSet() const { return h_ != OPFORGE_NO_HANDLE; }
  bool SameHandle(ShapeHandle o) const { return h_ == o.h_; }
  OpforgeShape opforge_handle() const { return h_; }

 private:
  friend class InferenceContext;
  ShapeHandle(const OpforgeShapeCtx* c, OpforgeShape h) : c_(c), h_(h) {}
  const OpforgeShapeCtx* c_ = nullptr;
  OpforgeShape h_ = OPFORGE_NO_HANDLE;
};

/** A dim of one shape-function call (TensorFlow's DimensionHandle). */
class DimensionHandle {
 public:
  DimensionHandle() = default;
  bool IsSet() const { return h_ != OPFORGE_NO_HANDLE; }
  bool SameHandle(DimensionHandle o) const { return h_ == o.h_; }
  OpforgeDim opforge_handle() const { return h_; }

 private:
  friend class InferenceContext;
  DimensionHandle(const OpforgeShapeCtx* c, OpforgeDim h) : c_(c), h_(h) {}
  const OpforgeShapeCtx* c_ = nullptr;
  OpforgeDim h_ = OPFORGE_NO_HANDLE;
};

/** A dim or a known size (TensorFlow's DimensionOrConstant). */
struct DimensionOrConstant {
  DimensionOrConstant(DimensionHandle d) : dim(d) {}  // NOLINT: implicit as TensorFlow's
  DimensionOrConstant(int64 v) : val(v) {}            // NOLINT
  DimensionOrConstant(int v) : val(v) {}              // NOLINT
  DimensionHandle dim;
  int64 val = -1;
};

/** What a shape function gets (TensorFlow's InferenceContext), over the
 *  host's OpforgeShapeCtx: same operations, same error texts (the host's
 *  own). */
class InferenceContext {
 public:
  static constexpr int64 kUnknownDim = -1;
  static constexpr int32 kUnknownRank = -1;

  explicit InferenceContext(OpforgeShapeCtx* ctx) : ctx_(ctx), api_(opforge_tf::host()->shape) {}
  InferenceContext(const InferenceContext&) = delete;
  InferenceContext& operator=(const InferenceContext&) = delete;

  int num_inputs() const { return static_cast<int>(api_->num_inputs(ctx_)); }
  int num_outputs() const { return static_cast<int>(api_->num_outputs(ctx_)); }
  ShapeHandle input(int64 idx) const {
    return ShapeHandle(ctx_, idx < 0 ? OPFORGE_NO_HANDLE : api_->input(ctx_, static_cast<size_t>(idx)));
  }
  /** The shapes of input argument `name` (a list argument gives several). */
  Status input(const std::string& name, std::vector<ShapeHandle>* out) const {
    size_t start = 0, stop = 0;
    TF_RETURN_IF_ERROR(call([&](OpforgeStatus* st) {
      return api_->arg_range(ctx_, opforge_tf::str(name), 0, &start, &stop, st);
    }));
    out->clear();
    for (size_t i = start; i < stop; ++i) out->push_back(input(static_cast<int64>(i)));
    return Status();
  }
  ShapeHandle output(int64 idx) const {
    return ShapeHandle(ctx_, idx < 0 ? OPFORGE_NO_HANDLE : api_->output(ctx_, static_cast<size_t>(idx)));
  }
  void set_output(int idx, ShapeHandle shape) {
    Status s = call([&](OpforgeStatus* st) {
      return api_->set_output(ctx_, static_cast<size_t>(idx), shape.h_, st);
    });
    if (!s.ok()) throw opforge_tf::CheckFailure("set_output(" + std::to_string(idx) + "): " + s.message());
  }
  Status set_output(const std::string& name, const std::vector<ShapeHandle>& shapes) {
    size_t start = 0, stop = 0;
    TF_RETURN_IF_ERROR(call([&](OpforgeStatus* st) {
      return api_->arg_range(ctx_, opforge_tf::str(name), 1, &start, &stop, st);
    }));
    if (stop - start != shapes.size())
      return errors::InvalidArgument("Must have exactly ", shapes.size(), " shapes.");
    for (size_t i = 0; i < shapes.size(); ++i) set_output(static_cast<int>(start + i), shapes[i]);
    return Status();
  }

  static int32 Rank(ShapeHandle s) {
    return s.c_ ? opforge_tf::host()->shape->rank(s.c_, s.h_) : kUnknownRank;
  }
  static bool RankKnown(ShapeHandle s) { return Rank(s) != kUnknownRank; }
  static int64 Value(DimensionOrConstant d) {
    if (!d.dim.IsSet()) return d.val;
    return d.dim.c_ ? opforge_tf::host()->shape->value(d.dim.c_, d.dim.h_) : kUnknownDim;
  }
  static bool ValueKnown(DimensionOrConstant d) { return Value(d) != kUnknownDim; }
  int64 NumElements(ShapeHandle s) const { return api_->num_elements(ctx_, s.h_); }
  bool FullyDefined(ShapeHandle s) const { return NumElements(s) >= 0 && RankKnown(s); }

  DimensionHandle Dim(ShapeHandle s, int64 idx) {
    OpforgeDim d = OPFORGE_NO_HANDLE;
    Status st = call([&](OpforgeStatus* status) { return api_->dim(ctx_, s.h_, idx, &d, status); });
    if (!st.ok()) return UnknownDim();
    return DimensionHandle(ctx_, d);
  }
  DimensionHandle DimKnownRank(ShapeHandle s, int64 idx) { return Dim(s, idx); }

  Status WithRank(ShapeHandle s, int64 rank, ShapeHandle* out) {
    return shape_op(out, [&](OpforgeShape* o, OpforgeStatus* st) {
      return api_->with_rank(ctx_, s.h_, static_cast<int32_t>(rank), o, st);
    });
  }
  Status WithRankAtLeast(ShapeHandle s, int64 rank, ShapeHandle* out) {
    return shape_op(out, [&](OpforgeShape* o, OpforgeStatus* st) {
      return api_->with_rank_at_least(ctx_, s.h_, static_cast<int32_t>(rank), o, st);
    });
  }
  Status WithRankAtMost(ShapeHandle s, int64 rank, ShapeHandle* out) {
    return shape_op(out, [&](OpforgeShape* o, OpforgeStatus* st) {
      return api_->with_rank_at_most(ctx_, s.h_, static_cast<int32_t>(rank), o, st);
    });
  }
  Status WithValue(DimensionHandle d, int64 value, DimensionHandle* out) {
    return dim_op(out, [&](OpforgeDim* o, OpforgeStatus* st) {
      return api_->with_value(ctx_, d.h_, value, o, st);
    });
  }
  Status Merge(ShapeHandle a, ShapeHandle b, ShapeHandle* out) {
    return shape_op(out, [&](OpforgeShape* o, OpforgeStatus* st) {
      return api_->merge(ctx_, a.h_, b.h_, o, st);
    });
  }
  Status Merge(DimensionHandle a, DimensionHandle b, DimensionHandle* out) {
    return dim_op(out, [&](OpforgeDim* o, OpforgeStatus* st) {
      return api_->merge_dim(ctx_, a.h_, b.h_, o, st);
    });
  }
  Status MergePrefix(ShapeHandle s, ShapeHandle prefix, ShapeHandle* s_out, ShapeHandle* prefix_out) {
    OpforgeShape a = OPFORGE_NO_HANDLE, b = OPFORGE_NO_HANDLE;
    TF_RETURN_IF_ERROR(call([&](OpforgeStatus* st) {
      return api_->merge_prefix(ctx_, s.h_, prefix.h_, &a, &b, st);
    }));
    *s_out = ShapeHandle(ctx_, a);
    *prefix_out = ShapeHandle(ctx_, b);
    return Status();
  }
  Status Subshape(ShapeHandle s, int64 start, ShapeHandle* out) {
    return Subshape(s, start, OPFORGE_TO_END, 1, out);
  }
  Status Subshape(ShapeHandle s, int64 start, int64 end, ShapeHandle* out) {
    return Subshape(s, start, end, 1, out);
  }
  Status Subshape(ShapeHandle s, int64 start, int64 end, int64 stride, ShapeHandle* out) {
    return shape_op(out, [&](OpforgeShape* o, OpforgeStatus* st) {
      return api_->subshape(ctx_, s.h_, start, end, stride, o, st);
    });
  }
  Status Concatenate(ShapeHandle a, ShapeHandle b, ShapeHandle* out) {
    return shape_op(out, [&](OpforgeShape* o, OpforgeStatus* st) {
      return api_->concatenate(ctx_, a.h_, b.h_, o, st);
    });
  }
  Status ReplaceDim(ShapeHandle s, int64 idx, DimensionHandle d, ShapeHandle* out) {
    return shape_op(out, [&](OpforgeShape* o, OpforgeStatus* st) {
      return api_->replace_dim(ctx_, s.h_, idx, d.h_, o, st);
    });
  }

  DimensionHandle MakeDim(DimensionOrConstant d) {
    if (d.dim.IsSet()) return d.dim;
    return DimensionHandle(ctx_, api_->make_dim(ctx_, d.val));
  }
  DimensionHandle UnknownDim() { return DimensionHandle(ctx_, api_->make_dim(ctx_, OPFORGE_UNKNOWN_DIM)); }
  ShapeHandle MakeShape(const std::vector<DimensionHandle>& dims) {
    std::vector<OpforgeDim> h;
    for (auto& d : dims) h.push_back(d.h_);
    return make_shape(h);
  }
  ShapeHandle MakeShape(std::initializer_list<DimensionOrConstant> dims) {
    std::vector<OpforgeDim> h;
    for (auto& d : dims) h.push_back(MakeDim(d).h_);
    return make_shape(h);
  }
  ShapeHandle Scalar() { return MakeShape(std::vector<DimensionHandle>{}); }
  ShapeHandle Vector(DimensionOrConstant d) { return MakeShape({d}); }
  ShapeHandle Matrix(DimensionOrConstant a, DimensionOrConstant b) { return MakeShape({a, b}); }
  ShapeHandle UnknownShape() { return ShapeHandle(ctx_, api_->unknown_shape(ctx_, OPFORGE_UNKNOWN_RANK)); }
  ShapeHandle UnknownShapeOfRank(int64 rank) {
    return ShapeHandle(ctx_, api_->unknown_shape(ctx_, static_cast<int32_t>(rank)));
  }
  Status MakeShapeFromShapeTensor(int input_idx, ShapeHandle* out) {
    return shape_op(out, [&](OpforgeShape* o, OpforgeStatus* st) {
      return api_->input_as_shape(ctx_, static_cast<size_t>(input_idx), o, st);
    });
  }
  Status MakeShapeFromTensorShape(const TensorShape& s, ShapeHandle* out) {
    std::vector<DimensionHandle> dims;
    for (int i = 0; i < s.dims(); ++i) dims.push_back(MakeDim(s.dim_size(i)));
    *out = MakeShape(dims);
    return Status();
  }
  Status MakeShapeFromPartialTensorShape(const PartialTensorShape& s, ShapeHandle* out) {
    if (s.unknown_rank()) {
      *out = UnknownShape();
      return Status();
    }
    std::vector<DimensionHandle> dims;
    for (int i = 0; i < s.dims(); ++i) dims.push_back(MakeDim(s.dim_size(i)));
    *out = MakeShape(dims);
    return Status();
  }

  Status Add(DimensionHandle a, DimensionOrConstant b, DimensionHandle* out) {
    return arith(OPFORGE_DIM_ADD, a, b, out);
  }
  Status Subtract(DimensionHandle a, DimensionOrConstant b, DimensionHandle* out) {
    return arith(OPFORGE_DIM_SUB, a, b, out);
  }
  Status Multiply(DimensionHandle a, DimensionOrConstant b, DimensionHandle* out) {
    return arith(OPFORGE_DIM_MUL, a, b, out);
  }
  Status Divide(DimensionHandle a, DimensionOrConstant b, bool evenly_divisible, DimensionHandle* out) {
    return arith(evenly_divisible ? OPFORGE_DIM_DIV_EXACT : OPFORGE_DIM_DIV, a, b, out);
  }
  Status Min(DimensionHandle a, DimensionOrConstant b, DimensionHandle* out) {
    return arith(OPFORGE_DIM_MIN, a, b, out);
  }
  Status Max(DimensionHandle a, DimensionOrConstant b, DimensionHandle* out) {
    return arith(OPFORGE_DIM_MAX, a, b, out);
  }

  /** The value of input `idx` when it is a constant known now, else null
   *  (valid during the shape function). */
  const Tensor* input_tensor(int idx) {
    OpforgeTensor v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    if (idx < 0 || !api_->input_tensor(ctx_, static_cast<size_t>(idx), &v)) return nullptr;
    tensors_.push_back(opforge_detail::Access::from_view(v, -1));
    return &tensors_.back();
  }

  template <typename T>
  Status GetAttr(const std::string& name, T* value) const {
    return opforge_attr::read(
        [&](OpforgeStr n, OpforgeAttrValue* v, OpforgeStatus* st) { return api_->attr(ctx_, n, v, st); },
        name, value);
  }

  std::string DebugString(ShapeHandle s) const { return opforge_tf::to_string(api_->shape_string(ctx_, s.h_)); }
  std::string DebugString(DimensionHandle d) const {
    int64 v = Value(d);
    return v == kUnknownDim ? "?" : std::to_string(v);
  }

 private:
  template <typename F>
  Status call(F&& f) const {
    opforge_tf::HostStatus st;
    if (f(st.get()) != OPFORGE_OK) return st.status();
    return Status();
  }
  template <typename F>
  Status shape_op(ShapeHandle* out, F&& f) {
    OpforgeShape o = OPFORGE_NO_HANDLE;
    TF_RETURN_IF_ERROR(call([&](OpforgeStatus* st) { return f(&o, st); }));
    *out = ShapeHandle(ctx_, o);
    return Status();
  }
  template <typename F>
  Status dim_op(DimensionHandle* out, F&& f) {
    OpforgeDim o = OPFORGE_NO_HANDLE;
    TF_RETURN_IF_ERROR(call([&](OpforgeStatus* st) { return f(&o, st); }));
    *out = DimensionHandle(ctx_, o);
    return Status();
  }
  Status arith(uint32_t op, DimensionHandle a, DimensionOrConstant b, DimensionHandle* out) {
    DimensionHandle bd = MakeDim(b);
    return dim_op(out, [&](OpforgeDim* o, OpforgeStatus* st) {
      return api_->dim_op(ctx_, op, a.h_, bd.h_, o, st);
    });
  }
  ShapeHandle make_shape(const std::vector<OpforgeDim>& dims) {
    OpforgeShape o = OPFORGE_NO_HANDLE;
    Status s = call([&](OpforgeStatus* st) {
      return api_->make_shape(ctx_, dims.data(), dims.size(), &o, st);
    });
    if (!s.ok()) throw opforge_tf::CheckFailure("MakeShape: " + s.message());
    return ShapeHandle(ctx_, o);
  }

  OpforgeShapeCtx* ctx_;
  const OpforgeShapeApi* api_;
  std::deque<Tensor> tensors_;
};

/** A shape function (TensorFlow's OpShapeInferenceFn). */
typedef std::function<Status(InferenceContext*)> ShapeInferenceFn;

}  // namespace shape_inference

typedef shape_inference::ShapeInferenceFn OpShapeInferenceFn;

}  // namespace tensorflow

#endif /* OPFORGE_TF_SHAPE_H_ */
