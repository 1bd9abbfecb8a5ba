/* cycle_a - breaks file-cycle with cycle_b.c: each calls the other. */
int cycle_b_value(int n);

int cycle_a_value(int n)
{
    return n > 0 ? cycle_b_value(n - 1) : 0;
}
