2
// kevo doc    tuned
// kevo param  THREADS 128 256 512 1024
// kevo param  VEC 1 2 4
// kevo scratch part f32[M, cdiv(N, THREADS*VEC)]
// kevo flags  -use_fast_math -maxrregcount=64 -ftz=true
// kevo launch pass1 grid=(cdiv(N, THREADS*VEC), M) block=THREADS smem=THREADS*4 (x, part, N, VEC)
// kevo launch pass2 grid=M block=THREADS (part, y, a, N)
