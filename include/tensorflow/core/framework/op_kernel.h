/* opforge's TensorFlow C++ layer at TensorFlow's path: OpKernel, OpKernelConstruction, OpKernelContext, REGISTER_KERNEL_BUILDER.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_OP_KERNEL_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_OP_KERNEL_H_
#include <opforge/tf/kernel.h>
#endif
