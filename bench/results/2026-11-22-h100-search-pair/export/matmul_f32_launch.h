/* matmul_f32_launch.h - launchers exported by kevo for task matmul_f32 (see README.md). Tensors
 * are device pointers in the task's layout; sizes are the task's size names. */
#ifndef matmul_f32_LAUNCH_H
#define matmul_f32_LAUNCH_H
#include <stdbool.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#ifdef __cplusplus
extern "C" {
#endif
cudaError_t matmul_f32_launch(const void *a, const void *b, void *c, int64_t M, int64_t N, int64_t K, cudaStream_t stream);
cudaError_t matmul_f32_reference_launch(const void *a, const void *b, void *c, int64_t M, int64_t N, int64_t K, cudaStream_t stream);
#ifdef __cplusplus
}
#endif
#endif
