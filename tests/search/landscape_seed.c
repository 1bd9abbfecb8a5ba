// kevo param  A 1 2 3 4 5 6
// kevo param  B 1 2 3 4 5 6
// kevo call   landscape(x, y, N)
/*
 * The seed of tests/search/landscape.c: correct for every A and B, plus 6 (|A - 4| +
 * |B - 2|) redundant passes of a serial float recurrence over a quarter of x (about
 * 0.1 ms each; without -ffast-math the compiler may not reorder it), so the farther
 * (A, B) is from (4, 2) the slower it is. The volatile sink keeps the passes alive.
 */
volatile float landscape_sink;

void landscape(const float *x, float *y, int n)
{
    int d = (A > 4 ? A - 4 : 4 - A) + (B > 2 ? B - 2 : 2 - B);
    float acc = 0.0f;

    for (int i = 0; i < n; i++)
        y[i] = 2.0f * x[i] + 1.0f;
    for (int rep = 0; rep < 6 * d; rep++)
        for (int i = 0; i < n / 4; i++)
            acc = acc * 0.999f + x[i];
    landscape_sink = acc;
}
