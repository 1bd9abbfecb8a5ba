0
// kevo task bad
// kevo size M=4611686018427387904 N=2
// kevo input x u8[M] randint(0, 256)
// kevo output y u8[M,N]
// kevo bytes 8*M*N
// kevo launch k grid=cdiv(M, 0) block=(1,2,3,4) (x, y, z)
