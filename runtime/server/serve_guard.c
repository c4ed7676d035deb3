/* serve_guard.c - a total deadline on receiving a request (see serve.h).
 *
 * libmicrohttpd's connection timeout counts silence: a client that sends one
 * header byte every few seconds ("slowloris") keeps its connection forever,
 * and enough of them hold every connection slot. Here every connection is
 * listed from the moment it opens; one that has not delivered a whole request
 * (headers and body) within --request-read-timeout seconds of opening (or of
 * its previous request's end) has its socket shut down. shutdown() leaves the
 * descriptor to libmicrohttpd, which sees the end of the stream and closes the
 * connection as it closes any other; the list's lock is held across it and
 * across the close notification, so the descriptor is never one reused by a
 * later connection.
 */
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "serve.h"

typedef struct guard_conn guard_conn;
struct guard_conn {
    int fd;
    double t0;           /* opened, or its last request ended */
    bool receiving;      /* a request is being received (or none yet) */
    bool shut;
    guard_conn *prev, *next;
};

struct serve_guard {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    guard_conn head;     /* circular list sentinel */
    double deadline;     /* seconds */
    bool stop;
    pthread_t thread;
    int64_t shut_count;
};

static void *guard_main(void *arg)
{
    serve_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        double now = serve_wall();
        for (guard_conn *c = g->head.next; c != &g->head; c = c->next)
            if (c->receiving && !c->shut && now - c->t0 > g->deadline) {
                shutdown(c->fd, SHUT_RDWR);
                c->shut = true;
                g->shut_count++;
            }
        /* A quarter of the deadline (at most 1 s) between looks. */
        double d = g->deadline / 4 < 1 ? g->deadline / 4 : 1;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)(d * 1e9);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&g->wake, &g->mu, &until);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

serve_guard *serve_guard_start(double deadline_seconds)
{
    if (deadline_seconds <= 0) return NULL;
    serve_guard *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->wake, NULL);
    g->head.next = g->head.prev = &g->head;
    g->deadline = deadline_seconds;
    if (pthread_create(&g->thread, NULL, guard_main, g)) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return NULL;
    }
    return g;
}

void serve_guard_stop(serve_guard *g)
{
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    /* Connections still listed were closed by the daemon's stop (it
     * notifies each); free whatever is left all the same. */
    for (guard_conn *c = g->head.next, *n; c != &g->head; c = n) {
        n = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void serve_guard_opened(serve_guard *g, int fd, void **socket_context)
{
    *socket_context = NULL;
    if (!g) return;
    guard_conn *c = calloc(1, sizeof *c);
    if (!c) return; /* out of memory: this connection goes unwatched */
    c->fd = fd;
    c->t0 = serve_wall();
    c->receiving = true;
    pthread_mutex_lock(&g->mu);
    c->next = &g->head;
    c->prev = g->head.prev;
    g->head.prev->next = c;
    g->head.prev = c;
    pthread_mutex_unlock(&g->mu);
    *socket_context = c;
}

void serve_guard_closed(serve_guard *g, void *socket_context)
{
    guard_conn *c = socket_context;
    if (!g || !c) return;
    pthread_mutex_lock(&g->mu);
    c->prev->next = c->next;
    c->next->prev = c->prev;
    pthread_mutex_unlock(&g->mu);
    free(c);
}

void serve_guard_received(serve_guard *g, void *socket_context, bool received)
{
    guard_conn *c = socket_context;
    if (!g || !c) return;
    pthread_mutex_lock(&g->mu);
    c->receiving = !received;
    if (!received) c->t0 = serve_wall();
    pthread_mutex_unlock(&g->mu);
}

int64_t serve_guard_shut(serve_guard *g)
{
    if (!g) return 0;
    pthread_mutex_lock(&g->mu);
    int64_t n = g->shut_count;
    pthread_mutex_unlock(&g->mu);
    return n;
}
