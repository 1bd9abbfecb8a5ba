/*
 * testutil - what every cmocka test program includes.
 */
#ifndef KEVO_TESTUTIL_H
#define KEVO_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#endif
