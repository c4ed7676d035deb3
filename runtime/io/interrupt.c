/* interrupt.c - see interrupt.h. */
#include "interrupt.h"
#include "rkv_core.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t pending, signals_seen;
/* The whole-line writer's writes under way (any thread), and the exit a third
 * signal asked for while one was: the writer exits once its lines are out,
 * since the kept partial line and the new whole lines are two write()s and
 * an exit between them would end the output inside a line. Both sides store
 * first and load second (sequentially consistent), so at least one of them
 * sees the other and exits. */
static atomic_int line_writes, exit_asked;

static void on_signal(int sig)
{
    /* The first asks for a stop after the step under way; a second one is
     * the impatient repeat of the same request (the summary is still
     * written); a third gives up at once. */
    if (++signals_seen >= 3) {
        int code = 128 + (pending ? pending : sig);
        atomic_store(&exit_asked, code);
        if (atomic_load(&line_writes) == 0) _exit(code);
        return;
    }
    if (!pending) pending = sig;
}

void interrupt_install(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    const int sigs[] = {SIGINT, SIGTERM};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        /* A signal the shell set to be ignored (`radixkv ... &` ignores
         * SIGINT) stays ignored, as POSIX asks of non-interactive programs. */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

int interrupt_pending(void) { return pending; }

void interrupt_reset(void) { pending = signals_seen = 0; }

int interrupt_exit_status(void) { return pending ? 128 + pending : 0; }

/* ---- the signal thread (servers) ----------------------------------------- */

static struct {
    int pipe[2];
    pthread_t thread;
    void (*fn)(int, int, void *);
    void *arg;
    sigset_t old_mask;
} sigthread = {.pipe = {-1, -1}};

/* Async-signal-safe: one byte per signal, read by the thread. errno is kept
 * for the code the signal interrupted. */
static void forward_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(sigthread.pipe[1], &b, 1);
    (void)w; /* a full pipe already holds enough signals to act on */
    errno = saved;
}

static void *signal_main(void *unused)
{
    (void)unused;
    /* This thread may take the signals itself: the handler writes the pipe. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
    int count = 0;
    for (;;) {
        unsigned char b;
        ssize_t r = read(sigthread.pipe[0], &b, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || b == 0) break; /* 0: interrupt_thread_stop */
        sigthread.fn(b, ++count, sigthread.arg);
    }
    return NULL;
}

int interrupt_thread_start(void (*fn)(int sig, int count, void *arg), void *arg)
{
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    if (pthread_sigmask(SIG_BLOCK, &sigs, &sigthread.old_mask)) return -1;
    /* The write end never blocks: a handler must not wait on a full pipe. */
    if (pipe2(sigthread.pipe, O_CLOEXEC)) goto fail;
    fcntl(sigthread.pipe[1], F_SETFL, fcntl(sigthread.pipe[1], F_GETFL) | O_NONBLOCK);
    sigthread.fn = fn;
    sigthread.arg = arg;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_signal;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    struct sigaction old_int, old_term;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int e = pthread_create(&sigthread.thread, NULL, signal_main, NULL);
    if (e == 0) return 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    close(sigthread.pipe[0]);
    close(sigthread.pipe[1]);
    sigthread.pipe[0] = sigthread.pipe[1] = -1;
    errno = e;
fail:
    pthread_sigmask(SIG_SETMASK, &sigthread.old_mask, NULL);
    return -1;
}

void interrupt_thread_stop(void)
{
    if (sigthread.pipe[1] < 0) return;
    unsigned char stop = 0;
    while (write(sigthread.pipe[1], &stop, 1) < 0 && errno == EINTR) {}
    pthread_join(sigthread.thread, NULL);
    /* The command is finishing, its output written: a signal from here on
     * (or one still pending on a thread that blocks it) is ignored rather
     * than allowed to kill the process at the last moment. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    close(sigthread.pipe[0]);
    close(sigthread.pipe[1]);
    sigthread.pipe[0] = sigthread.pipe[1] = -1;
}

/* The whole-line writer: stdio hands it whatever it flushes; it writes up to
 * the last newline and keeps the rest. */
typedef struct line_out {
    FILE *f;
    int fd;
    char *tail;
    size_t n, cap;
} line_out;

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static ssize_t line_write_whole(line_out *o, const char *buf, size_t size);

static ssize_t line_write(void *cookie, const char *buf, size_t size)
{
    atomic_fetch_add(&line_writes, 1);
    ssize_t r = line_write_whole(cookie, buf, size);
    if (atomic_fetch_sub(&line_writes, 1) == 1 && atomic_load(&exit_asked))
        _exit(atomic_load(&exit_asked));
    return r;
}

/* line_write's body, run with the third signal's exit held off. */
static ssize_t line_write_whole(line_out *o, const char *buf, size_t size)
{
    const size_t total = size;
    const char *nl = memrchr(buf, '\n', size);
    if (nl) {
        size_t head = (size_t)(nl - buf) + 1;
        /* The kept partial line first, then the new whole lines. */
        if ((o->n && write_all(o->fd, o->tail, o->n)) || write_all(o->fd, buf, head)) return -1;
        o->n = 0;
        buf += head;
        size -= head;
    }
    if (rkv_grow_size((void **)&o->tail, &o->cap, o->n + size, 1)) {
        errno = ENOMEM;
        return -1;
    }
    if (size) memcpy(o->tail + o->n, buf, size);
    o->n += size;
    return (ssize_t)total;
}

static int line_close(void *cookie)
{
    line_out *o = cookie;
    /* A last line without its newline is written as it is: nothing is lost. */
    int rc = o->n ? write_all(o->fd, o->tail, o->n) : 0;
    if (fclose(o->f) != 0) rc = -1;
    free(o->tail);
    free(o);
    return rc;
}

FILE *interrupt_stream(FILE *f)
{
    line_out *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    fflush(f);
    o->f = f;
    o->fd = fileno(f);
    cookie_io_functions_t io = {.write = line_write, .close = line_close};
    FILE *w = fopencookie(o, "w", io);
    if (!w) free(o);
    return w;
}
