/* progress.c - see progress.h. */
#include "progress.h"

#include <time.h>
#include <unistd.h>

enum { BAR_WIDTH = 24 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_start(progress *p, const char *label, const char *unit, int64_t total,
                    bool enabled)
{
    p->f = stderr;
    p->label = label ? label : "progress";
    p->unit = unit ? unit : "";
    p->total = total > 0 ? total : 0;
    p->done = 0;
    p->enabled = enabled;
    p->tty = isatty(fileno(p->f)) == 1;
    p->drawn = false;
    p->calls = 0;
    p->stride = 1;
    p->t0 = p->last = p->checked = now_s();
    p->delay_s = 3.0;
}

double progress_elapsed(const progress *p) { return now_s() - p->t0; }

/* Human-readable count: 1234 -> "1.2k". */
static void fmt_count(char *buf, size_t n, int64_t v)
{
    if (v >= 1000000000) snprintf(buf, n, "%.1fG", (double)v / 1e9);
    else if (v >= 1000000) snprintf(buf, n, "%.1fM", (double)v / 1e6);
    else if (v >= 1000) snprintf(buf, n, "%.1fk", (double)v / 1e3);
    else snprintf(buf, n, "%lld", (long long)v);
}

static void draw(progress *p, double t)
{
    char d[32], tot[32];
    fmt_count(d, sizeof d, p->done);
    if (p->tty) fputc('\r', p->f);
    fprintf(p->f, "%s ", p->label);
    if (p->total > 0) {
        double frac = (double)p->done / (double)p->total;
        if (frac > 1) frac = 1;
        int fill = (int)(frac * BAR_WIDTH + 0.5);
        fputc('[', p->f);
        for (int i = 0; i < BAR_WIDTH; i++) fputc(i < fill ? '#' : '.', p->f);
        fmt_count(tot, sizeof tot, p->total);
        fprintf(p->f, "] %5.1f%%  %s/%s %s", 100.0 * frac, d, tot, p->unit);
    } else {
        fprintf(p->f, "%s %s", d, p->unit);
    }
    fprintf(p->f, "  %.1f s", t - p->t0);
    if (p->tty) fputs("\033[K", p->f); /* clear what a longer line left */
    else fputc('\n', p->f);
    fflush(p->f);
    p->drawn = true;
    p->last = t;
}

void progress_update(progress *p, int64_t done)
{
    p->done = done;
    if (!p->enabled) return;
    /* Reading the clock on every call would dominate a fast replay loop; a
     * fixed stride would leave slow loops (engine steps of seconds) silent
     * for minutes. */
    if (++p->calls < p->stride) return;
    p->calls = 0;
    double t = now_s();
    if (t - p->checked < 1e-3 && p->stride < 256) p->stride *= 2;
    else if (t - p->checked > 0.1 && p->stride > 1) p->stride /= 2;
    p->checked = t;
    if (p->tty) {
        /* Short runs stay quiet even on a terminal. */
        if (t - p->t0 >= 0.5 && t - p->last >= 0.1) draw(p, t);
    } else if (t - p->t0 >= p->delay_s && t - p->last >= p->delay_s) {
        draw(p, t);
    }
}

void progress_finish(progress *p)
{
    if (!p->enabled || !p->drawn) return;
    draw(p, now_s());
    if (p->tty) fputc('\n', p->f);
    fflush(p->f);
}
