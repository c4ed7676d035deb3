/* interrupt.h - SIGINT / SIGTERM for the long commands (cache-sim, run), and
 * output that a signal can never cut inside a line.
 *
 *   first signal   a flag: the command finishes its current step, writes its
 *                  complete lines and a summary with "interrupted": true,
 *                  tears down (a spill tier removes its files) and exits
 *                  128 + signal (130 for SIGINT, 143 for SIGTERM)
 *   second signal  nothing more: the stop already asked for goes on, and the
 *                  summary is still written (a repeated Ctrl-C loses nothing)
 *   third signal   _exit(128 + first signal) at once; a spill tier's disk file
 *                  is unlinked while open (cache_tier.c), so even then no file
 *                  is left behind
 *   ignored        a signal inherited as ignored (SIG_IGN, e.g. `cmd &` for
 *                  SIGINT) stays ignored
 *
 * interrupt_stream(f) puts f behind a writer that passes only whole lines to
 * the file descriptor and keeps a trailing partial line until its newline
 * comes: whatever ends the process (the third signal, SIGKILL), the output
 * ends at a line boundary. Ownership: the returned FILE replaces f; fclose it
 * (that closes f too).
 *
 * A server (serve) takes signals on a dedicated thread instead, and a second
 * signal never exits by itself: interrupt_thread_start(fn, arg) blocks SIGINT
 * and SIGTERM in the calling thread (so every thread it starts later inherits
 * the mask) and installs a handler that only writes the signal number to a
 * pipe. Threads started before that, at library load (OpenBLAS's pool starts
 * from its constructor, before main), still take the signals, but run that
 * handler rather than the default action that kills the process. The
 * dedicated thread reads the pipe and calls fn(sig, count, arg), count being
 * 1 for the first signal, 2 for the second, and so on; fn runs on that
 * thread only, so it may lock mutexes. interrupt_thread_stop() joins the
 * thread; SIGINT and SIGTERM are ignored from then on (the command is
 * writing its last lines and exiting).
 */
#ifndef RKV_INTERRUPT_H
#define RKV_INTERRUPT_H

#include <stdio.h>

/* Installs the handlers (once per process). */
void interrupt_install(void);
/* The first signal received (SIGINT or SIGTERM), 0 when none. */
int interrupt_pending(void);
/* Forget the signals seen: a process that runs several commands (the
 * Python package) starts each with no stop pending. */
void interrupt_reset(void);
/* The exit status for a pending signal: 128 + signal. */
int interrupt_exit_status(void);
/* The signal thread (see above); 0 on success, -1 (errno set) when it could
 * not start. One at a time per process. */
int interrupt_thread_start(void (*fn)(int sig, int count, void *arg), void *arg);
void interrupt_thread_stop(void);
/* f behind a whole-line writer (see above); NULL when out of memory. */
FILE *interrupt_stream(FILE *f);

#endif
