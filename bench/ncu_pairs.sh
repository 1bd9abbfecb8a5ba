# ncu_pairs.sh - the kernels bench/ncu_fidelity.sh and bench/profile_agreement.sh measure
# against Nsight Compute, as "KERNEL TASK CANDIDATE" (sourced: sets the array `pairs`).
# Memory-bound vector add, softmax, RMSNorm, scale-shift; compute-bound SGEMM.
pairs=(
  "vadd_vec4 tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu"
  "softmax_fast tasks/level1/softmax_rows.cu examples/seeds/softmax_rows.cu"
  "rmsnorm_warp tasks/level1/rmsnorm_f32.cu tests/exploits/cuda/control_rmsnorm_f32.cu"
  "scale_shift_vec4 bench/tasks/scale_shift.cu bench/tasks/scale_shift_vec4.cu"
  "sgemm_tiled tasks/level1/matmul_f32.cu examples/seeds/matmul_f32.cu"
)
