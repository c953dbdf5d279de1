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

/** TensorFlow's common shape functions (common_shape_fns.h). */
namespace shape_inference {

inline Status UnknownShape(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->UnknownShape());
  return Status();
}
inline Status UnchangedShape(InferenceContext* c) {
  c->set_output(0, c->input(0));
  return Status();
}
inline Status UnchangedShapeWithRank(InferenceContext* c, int32 rank) {
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), rank, &out));
  c->set_output(0, out);
  return Status();
}
inline Status UnchangedShapeWithRankAtLeast(InferenceContext* c, int32 rank) {
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), rank, &out));
  c->set_output(0, out);
  return Status();
}
inline Status UnchangedShapeWithRankAtMost(InferenceContext* c, int32 rank) {
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(0), rank, &out));
  c->set_output(0, out);
  return Status();
}
inline Status ScalarShape(InferenceContext* c) {
  c->set_output(0, c->Scalar());
  return Status();
}
inline Status NoOutputs(InferenceContext* c) {
  (void)c;
  return Status();
}
/** Inputs 0 and 1 merged (TensorFlow's MergeBothInputsShapeFn). */
inline Status MergeBothInputsShapeFn(InferenceContext* c) {
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->Merge(c->input(0), c->input(1), &out));
  c->set_output(0, out);
  return Status();
}
/** [m, k] x [k, n] with transpose_a/transpose_b attrs. */
inline Status MatMulShape(InferenceContext* c) {
  ShapeHandle a, b;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &a));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &b));
  bool ta = false, tb = false;
  TF_RETURN_IF_ERROR(c->GetAttr("transpose_a", &ta));
  TF_RETURN_IF_ERROR(c->GetAttr("transpose_b", &tb));
  DimensionHandle m = c->Dim(a, ta ? 1 : 0), ka = c->Dim(a, ta ? 0 : 1);
  DimensionHandle n = c->Dim(b, tb ? 0 : 1), kb = c->Dim(b, tb ? 1 : 0);
  DimensionHandle merged;
  TF_RETURN_IF_ERROR(c->Merge(ka, kb, &merged));
  c->set_output(0, c->Matrix(m, n));
  return Status();
}
/** Numpy broadcasting of inputs 0 and 1 into output 0 (TensorFlow's
 *  BroadcastBinaryOpOutputShapeFn / BroadcastBinaryOpShapeFn). */
inline Status BroadcastBinaryOpOutputShapeFnHelper(InferenceContext* c, ShapeHandle a,
                                                   ShapeHandle b, bool incompatible_shape_error,
                                                   ShapeHandle* out) {
  if (!c->RankKnown(a) || !c->RankKnown(b)) {
    *out = c->UnknownShape();
    return Status();
  }
  const int32 ra = c->Rank(a), rb = c->Rank(b), r = std::max(ra, rb);
  std::vector<DimensionHandle> dims;
  for (int32 i = 0; i < r; ++i) {
    int32 ia = i - (r - ra), ib = i - (r - rb);
    DimensionHandle da = ia >= 0 ? c->Dim(a, ia) : c->MakeDim(1);
    DimensionHandle db = ib >= 0 ? c->Dim(b, ib) : c->MakeDim(1);
    int64 va = c->Value(da), vb = c->Value(db);
    if (va > 1 && vb > 1 && va != vb) {
      if (!incompatible_shape_error) {
        *out = c->UnknownShape();
        return Status();
      }
      return errors::InvalidArgument("Dimensions must be equal, but are ", va, " and ", vb,
                                     " with input shapes: ", c->DebugString(a), ", ",
                                     c->DebugString(b), ".");
    }
    if (va == 1) {
      dims.push_back(db);
    } else if (vb == 1) {
      dims.push_back(da);
    } else if (va == InferenceContext::kUnknownDim || vb == InferenceContext::kUnknownDim) {
      if (va > 1) {
        dims.push_back(da);
      } else if (vb > 1) {
        dims.push_back(db);
      } else if (da.SameHandle(db)) {
        dims.push_back(da);
      } else {
        dims.push_back(c->UnknownDim());
      }
    } else {
      DimensionHandle m;
      TF_RETURN_IF_ERROR(c->Merge(da, db, &m));
      dims.push_back(m);
    }
  }
  *out = c->MakeShape(dims);
  return Status();
}
inline Status BroadcastBinaryOpOutputShapeFn(InferenceContext* c, int output_index) {
  ShapeHandle out;
  TF_RETURN_IF_ERROR(BroadcastBinaryOpOutputShapeFnHelper(c, c->input(0), c->input(1), true, &out));
  c->set_output(output_index, out);
  return Status();
}
inline Status BroadcastBinaryOpShapeFn(InferenceContext* c) {
  return BroadcastBinaryOpOutputShapeFn(c, 0);
}
/** A reduction over input 1's axes with keep_dims (TensorFlow's
 *  ReductionShape, for constant axes; unknown otherwise). */
inline Status ReductionShape(InferenceContext* c) {
  ShapeHandle input = c->input(0);
  bool keep_dims = false;
  TF_RETURN_IF_ERROR(c->GetAttr("keep_dims", &keep_dims));
  const Tensor* axes = c->input_tensor(1);
  if (!axes || !c->RankKnown(input)) {
    c->set_output(0, keep_dims && c->RankKnown(input) ? c->UnknownShapeOfRank(c->Rank(input))
                                                      : c->UnknownShape());
    return Status();
  }
  const int32 r = c->Rank(input);
  std::vector<bool> reduce(static_cast<size_t>(r), false);
  for (int64 i = 0; i < axes->NumElements(); ++i) {
    int64 a = axes->dtype() == DT_INT32 ? axes->flat<int32>()(i) : axes->flat<int64>()(i);
    if (a < -r || a >= r)
      return errors::InvalidArgument("Invalid reduction dimension ", a, " for input with ", r,
                                     " dimensions.");
    reduce[static_cast<size_t>(a < 0 ? a + r : a)] = true;
  }
  std::vector<DimensionHandle> dims;
  for (int32 i = 0; i < r; ++i) {
    if (!reduce[static_cast<size_t>(i)]) {
      dims.push_back(c->Dim(input, i));
    } else if (keep_dims) {
      dims.push_back(c->MakeDim(1));
    }
  }
  c->set_output(0, c->MakeShape(dims));
  return Status();
}

}  // namespace shape_inference
}  // namespace tensorflow

#endif /* OPFORGE_TF_SHAPE_H_ */
