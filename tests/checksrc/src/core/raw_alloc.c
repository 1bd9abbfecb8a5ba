/* raw_alloc - allocates outside the allocator module: breaks raw-alloc. */
#include <stdlib.h>

void *raw_alloc(void) { return malloc(16); }
