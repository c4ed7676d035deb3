/* serve_http.h - the HTTP side of `radixkv serve` (serve_http.c): the
 * libmicrohttpd daemon, request parsing, responses and streams.
 *
 * It owns the daemon and the connections; jobs go to the engine thread
 * through serve.h (serve_submit_locked). The engine thread calls back only
 * through the hooks serve_http_start sets in struct serve (s->http), so
 * serve_engine.c never includes this header.
 */
#ifndef RKV_SERVE_HTTP_H
#define RKV_SERVE_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "serve.h"

/* Bind and start the daemon; sets s->http's hooks first. */
int serve_http_start(serve *s, char *err, size_t errlen);
/* Has the client of a suspended, non-streaming job gone away (under s->mu)?
 * Peeks at its socket: end of file or an error means gone. */
bool serve_http_client_gone_locked(const serve_job *j);
void serve_http_stop(serve *s);
/* Wake a suspended connection (under s->mu). */
void serve_http_resume_locked(serve *s, serve_job *j);
/* The port bound. */
int serve_http_port(const serve *s);

#endif
