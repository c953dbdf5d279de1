/* opforge's TensorFlow C++ layer at TensorFlow's path: the common shape functions.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_COMMON_SHAPE_FNS_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_COMMON_SHAPE_FNS_H_
#include <opforge/tf/common_shape_fns.h>
#endif
