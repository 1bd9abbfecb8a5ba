0
// kevo task gemm_bf16
// kevo tags gemm
// kevo size M=4096 N=4096 K=cdiv(M, 2)*2
// kevo size K=64 N=min(4096, 96) M=max(1, 17)
// kevo input a bf16[M,K] uniform(-1, 1)
// kevo input b bf16[K,N] uniform(-1,1)
// kevo output c f32[M,N]
// kevo scratch ws f32[cdiv(M,128), cdiv(N,128)]
// kevo tol c rtol=2e-2 atol=1e-2
// kevo bytes 2*M*K + 2*K*N + 4*M*N
// kevo flops 2*M*N*K on bf16
// kevo launch gemm grid=(cdiv(N, 128), cdiv(M, 128), 1) block=(16, 16) smem=2*128*32*2 (a, b, c, ws, M, N, K)
