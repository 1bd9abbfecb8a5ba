/* func_length - a function body over the self-test's budget of 10 lines: breaks func-length. */
int func_length(int x)
{
    x += 1;
    x += 2;
    x += 3;
    x += 4;
    x += 5;
    x += 6;
    x += 7;
    x += 8;
    x += 9;
    x += 10;
    x += 11;
    return x;
}
