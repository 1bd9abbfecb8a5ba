/* banned - calls a banned function: breaks banned. */
#include <string.h>

void banned(char *dst, const char *src) { strcpy(dst, src); }
