/* check_run.h - how every Check test program runs its suite.
 *
 * A test program builds its own Suite (one per module, its own test cases and
 * timeouts) and returns check_run(suite) from main: the runner is created,
 * run with normal output, and freed here; the result is the process's exit
 * status. The caller gives up the suite (the runner frees it).
 */
#ifndef RKV_CHECK_RUN_H
#define RKV_CHECK_RUN_H

#include <check.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every test of s, each in a child process unless CK_FORK=no says otherwise;
 * EXIT_FAILURE if any failed, else EXIT_SUCCESS. */
int check_run(Suite *s);

/* The same, every test in this process: for programs whose state does not
 * survive fork() (a CUDA context). */
int check_run_nofork(Suite *s);

#ifdef __cplusplus
}
#endif

#endif
