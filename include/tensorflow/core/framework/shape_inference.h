/* opforge's TensorFlow C++ layer at TensorFlow's path: InferenceContext, ShapeHandle, DimensionHandle.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_SHAPE_INFERENCE_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_SHAPE_INFERENCE_H_
#include <opforge/tf/shape.h>
#endif
