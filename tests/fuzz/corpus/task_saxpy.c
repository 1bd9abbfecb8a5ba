1
#include <stdint.h>
// kevo task saxpy
// kevo size n=1000
// kevo size n=7
// kevo input x f64[n] uniform(-1, 1)
// kevo input idx i32[n] randint(0, n)
// kevo input m bool[n] randint(0, 2)
// kevo output out f64[n]
// kevo scalar a f64 -2.5
// kevo scalar k u8 255
// kevo tol rtol=0 atol=0
// kevo bytes 8*3*n
// kevo call saxpy(n, a, x, idx, m, out, k)
void saxpy(int n, double a, const double *x, const int *idx, const _Bool *m, double *out, unsigned char k) {}
