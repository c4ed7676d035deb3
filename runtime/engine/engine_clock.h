/* engine_clock.h - the engine's notion of time, in one place.
 *
 * Two clocks behind one interface:
 *   wall      (cpu, cuda backends) time is measured: now = wall time since the
 *             first step, plus the idle gaps jumped over between arrivals.
 *   modelled  (backends with BACKEND_CAP_MODELLED_TIME, e.g. sim) time is a
 *             sum: each step's modelled device seconds, the host CPU time the
 *             scheduler spent (left out with `fixed`, for repeatable runs),
 *             a configured host cost (engine_config host_step_s and
 *             host_token_s: counted with `fixed` too, since it is not
 *             measured) and the seconds a spill tier spent loading pages back.
 *
 * One step on the modelled clock (sync):
 *
 *   t ──[ host: schedule + batch ]──[ device: step_s ]──[ host: commit ]── t'
 *        engine_clock_launch          engine_clock_device   engine_clock_host
 *
 * Overlap: the host work of step n+1 hides behind step n's device time, so
 * launch takes the later of (t + host) and the end of the step in flight
 * (the `floor`).
 *
 * The struct is the engine's; these functions only read and move it.
 */
#ifndef RKV_ENGINE_CLOCK_H
#define RKV_ENGINE_CLOCK_H

#include <stdbool.h>

typedef struct engine_clock {
    bool modelled;      /* time is modelled, not measured */
    bool fixed;         /* modelled: host CPU time is not added (repeatable runs) */
    bool unmeasured;    /* fixed: nor read (nobody reports it); set after init */
    double t;           /* modelled time, seconds */
    double wall_start;  /* wall: when serving started */
    double idle_skip;   /* wall: idle time jumped over */
} engine_clock;

/* Monotonic wall time and this thread's CPU time, seconds. */
double engine_clock_wall_now(void);
double engine_clock_cpu_now(void);

/* This thread's CPU time as a step measures it: engine_clock_cpu_now, or 0
 * under a fixed modelled clock marked unmeasured, which leaves host time out
 * of the clock and whose measured scheduler time nobody reports. Several
 * reads a step are syscalls, a third of a simulated step's cost once the
 * accounting checks are off. */
double engine_clock_host_cpu(const engine_clock *c);

void engine_clock_init(engine_clock *c, bool modelled, bool fixed);
/* Serving starts now (wall clocks count from here). */
void engine_clock_start(engine_clock *c);
double engine_clock_now(const engine_clock *c);
/* Nothing to do until `next`: jump there (a no-op when it has passed).
 * Returns the time now, after the jump. */
double engine_clock_idle_until(engine_clock *c, double next);
/* Modelled: the host spent cpu_s scheduling and building the batch (measured,
 * left out when fixed) and injected_s more (a configured host cost, counted
 * even when fixed), and the batch launches no earlier than floor (has_floor:
 * a step is in flight, so overlap hides host time up to its end). */
void engine_clock_launch(engine_clock *c, double cpu_s, double injected_s, bool has_floor,
                         double floor);
/* Modelled: the device ran for step_s. */
void engine_clock_device(engine_clock *c, double step_s);
/* Modelled: host work after the step (commit): cpu_s unless fixed, plus
 * injected_s (configured, always). */
void engine_clock_host(engine_clock *c, double cpu_s, double injected_s);
/* Modelled: seconds spent moving pages (a spill tier's loads). */
void engine_clock_transfer(engine_clock *c, double s);

#endif
