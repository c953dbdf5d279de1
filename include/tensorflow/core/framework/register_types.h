/* opforge's TensorFlow C++ layer at TensorFlow's path: the TF_CALL_* type macros.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_REGISTER_TYPES_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_REGISTER_TYPES_H_
#include <opforge/tf/register_types.h>
#endif
