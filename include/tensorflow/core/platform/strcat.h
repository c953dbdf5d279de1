/* opforge's TensorFlow C++ layer at TensorFlow's path: strings::StrCat.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_PLATFORM_STRCAT_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_PLATFORM_STRCAT_H_
#include <opforge/tf/base.h>
#endif
