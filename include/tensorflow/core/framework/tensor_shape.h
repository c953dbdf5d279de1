/* opforge's TensorFlow C++ layer at TensorFlow's path: TensorShape, TensorShapeUtils, PartialTensorShape.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_TENSOR_SHAPE_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_TENSOR_SHAPE_H_
#include <opforge/tf/types.h>
#endif
