/* comma_return - a comma operator in a return: breaks comma-return. */
static int g;

int comma_return(void)
{
    return g = 1, 0;
}
