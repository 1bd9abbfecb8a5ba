/* json_pack - a json_pack call missing the key of its second pair: breaks json-pack. */
#include <jansson.h>

json_t *json_pack_bad(const char *name, long long bytes)
{
    return json_pack("{s:s, s:I}", "scratch", name, bytes);
}
