/* opforge's TensorFlow C++ layer: the common shape functions
 * (common_shape_fns.h). See opforge/tf/base.h. */
#ifndef OPFORGE_TF_COMMON_SHAPE_FNS_H_
#define OPFORGE_TF_COMMON_SHAPE_FNS_H_

#include <opforge/tf/shape.h>

#include <algorithm>

namespace tensorflow {

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

#endif /* OPFORGE_TF_COMMON_SHAPE_FNS_H_ */
