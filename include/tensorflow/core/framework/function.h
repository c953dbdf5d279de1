/* opforge's TensorFlow C++ layer at TensorFlow's path: REGISTER_OP_GRADIENT,
 * FunctionDefHelper, AttrSlice. Written for opforge over its C ABI (see
 * opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_FUNCTION_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_FUNCTION_H_
#include <opforge/tf/function.h>
#endif
