/* layering - base/ may include only base/: breaks layering. */
#include "base/mem.h"
#include "ctl/run.h"
