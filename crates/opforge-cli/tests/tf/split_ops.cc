// A library built from two files, as TensorFlow's custom-op repository lays
// ops out (the op here, its kernel in split_kernels.cc): the library record
// is in the file once.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("Negated")
    .Attr("T: {float, int32}")
    .Input("x: T")
    .Output("y: T")
    .SetShapeFn(shape_inference::UnchangedShape);
