/* opforge's TensorFlow C++ layer at TensorFlow's path: complex64, complex128, half, bfloat16.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_NUMERIC_TYPES_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_NUMERIC_TYPES_H_
#include <opforge/tf/types.h>
#endif
