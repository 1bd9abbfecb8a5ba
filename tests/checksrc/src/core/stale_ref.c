/* stale_ref - this comment names src/core/no_such_module.c: breaks stale-ref. */
int stale_ref(void) { return 0; }
