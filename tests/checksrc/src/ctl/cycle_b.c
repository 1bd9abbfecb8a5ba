/* cycle_b - breaks file-cycle with cycle_a.c: each calls the other. */
int cycle_a_value(int n);

int cycle_b_value(int n)
{
    return n > 0 ? cycle_a_value(n - 1) : 1;
}
