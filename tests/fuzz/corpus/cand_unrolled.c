3
// kevo param U 1 2 4 8
// kevo scratch acc f64[M*U]
// kevo flags -O3 -ffast-math -funroll-loops
// kevo call fast(x, y, acc, a, M, N, U)
