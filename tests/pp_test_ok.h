/* pp_test_ok.h — OK(expr): the expression must return PP_OK, else the test fails naming the
 * expression and the library's error message (pp_err_msg). For the suites that drive the
 * runtime and the libraries through their C API. */
#ifndef PP_TEST_OK_H
#define PP_TEST_OK_H

#include <criterion/criterion.h>

#include "pp_common.h"

#define OK(expr)                                                                                   \
    do {                                                                                           \
        pp_status st_ = (expr);                                                                    \
        cr_assert_eq(st_, PP_OK, "%s failed: %s", #expr, pp_err_msg());                            \
    } while (0)

#endif
