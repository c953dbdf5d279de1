/* opforge's TensorFlow C++ layer at TensorFlow's path: OP_REQUIRES and OP_REQUIRES_OK.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_OP_REQUIRES_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_OP_REQUIRES_H_
#include <opforge/tf/kernel.h>
#endif
