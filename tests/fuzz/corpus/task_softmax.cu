0
// kevo task   softmax_rows
// kevo doc    Softmax over the last axis of an M x N float32 matrix.
// kevo tags   softmax reduction
// kevo size   M=4096 N=8192
// kevo size   M=128 N=50257
// kevo holdout M=7 N=100003
// kevo input  x f32[M,N] normal(0,4)
// kevo output y f32[M,N]
// kevo bytes  8*M*N
// kevo flops  5*M*N
// kevo torch  torch.softmax(x, dim=-1)
// kevo launch softmax_ref grid=M block=256 smem=1024 (x, y, N)
extern "C" __global__ void softmax_ref(const float *x, float *y, int n) { }
