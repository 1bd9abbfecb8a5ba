/* loose - a source file directly under src/: breaks loose-file. */
int loose(void) { return 0; }
