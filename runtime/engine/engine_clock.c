/* engine_clock.c - see engine_clock.h. */
#include "engine_clock.h"

#include <time.h>

static double seconds_of(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double engine_clock_wall_now(void) { return seconds_of(CLOCK_MONOTONIC); }
double engine_clock_cpu_now(void) { return seconds_of(CLOCK_THREAD_CPUTIME_ID); }

double engine_clock_host_cpu(const engine_clock *c)
{
    return c->modelled && c->fixed && c->unmeasured ? 0 : engine_clock_cpu_now();
}

void engine_clock_init(engine_clock *c, bool modelled, bool fixed)
{
    *c = (engine_clock){.modelled = modelled, .fixed = fixed};
    c->wall_start = engine_clock_wall_now();
}

void engine_clock_start(engine_clock *c) { c->wall_start = engine_clock_wall_now(); }

double engine_clock_now(const engine_clock *c)
{
    if (c->modelled) return c->t;
    return engine_clock_wall_now() - c->wall_start + c->idle_skip;
}

double engine_clock_idle_until(engine_clock *c, double next)
{
    double t = engine_clock_now(c);
    if (next <= t) return t;
    if (c->modelled) c->t = next;
    else c->idle_skip += next - t;
    return next;
}

void engine_clock_launch(engine_clock *c, double cpu_s, double injected_s, bool has_floor,
                         double floor)
{
    if (!c->modelled) return;
    double t = c->t + (c->fixed ? 0 : cpu_s) + injected_s;
    c->t = has_floor && floor > t ? floor : t;
}

void engine_clock_device(engine_clock *c, double step_s)
{
    if (c->modelled) c->t += step_s;
}

void engine_clock_host(engine_clock *c, double cpu_s, double injected_s)
{
    if (!c->modelled) return;
    c->t += (c->fixed ? 0 : cpu_s) + injected_s;
}

void engine_clock_transfer(engine_clock *c, double s)
{
    if (c->modelled) c->t += s;
}
