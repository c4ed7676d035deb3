/* progress.h - a progress bar on stderr for long runs (trace replays, sweeps).
 *
 * Drawn only when it helps: on a terminal once the run has lasted half a
 * second (redrawn in place), otherwise (logs, CI) only after a few seconds, and
 * then at most once every few seconds as plain lines. progress_update() reads
 * the clock at most once every `stride` calls; the stride grows (up to 256)
 * while calls come faster than a millisecond apart and shrinks back to 1 when
 * they are slow, so calling it per request costs nothing and a run of slow
 * engine steps still prints its periodic lines.
 *
 *   replay [##########..........]  48.2%  5.8M/12.0M tokens  3.1 s
 *
 * The caller owns the struct (no allocation); progress_finish() ends the line.
 */
#ifndef RKV_PROGRESS_H
#define RKV_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct progress {
    FILE *f;            /* stderr unless set otherwise */
    const char *label;  /* e.g. "replay" */
    const char *unit;   /* e.g. "bytes", "tokens" */
    int64_t total;      /* 0 when unknown: a counter instead of a bar */
    int64_t done;
    bool enabled;       /* false: never draws */
    bool tty;           /* f is a terminal: redraw in place */
    bool drawn;         /* something was printed (finish ends the line) */
    uint32_t calls;     /* calls since the last clock read */
    uint32_t stride;    /* read the clock once every `stride` calls (1..256) */
    double checked;     /* seconds (monotonic) of the last clock read */
    double t0, last;    /* seconds (monotonic) */
    double delay_s;     /* non-tty: first line after this many seconds */
} progress;

/* total may be 0 (unknown). enabled = false turns it off entirely. */
void progress_start(progress *p, const char *label, const char *unit, int64_t total,
                    bool enabled);
/* Sets the amount done (absolute, not a delta) and redraws when due. */
void progress_update(progress *p, int64_t done);
/* Final redraw (if anything was drawn) and newline. */
void progress_finish(progress *p);
/* Seconds since progress_start. */
double progress_elapsed(const progress *p);

#endif
