/* _radixkv.c - the CPython binding of radixkv: a thin room on top of the
 * library that converts types and releases the GIL around long calls; the C
 * library underneath does not know Python exists.
 *
 *   Cache    one page pool and one cache of a registered kind (cache.h);
 *            match / insert / lock / unlock / evict / sizes / stats / check,
 *            plus the pool's alloc and free for the pages an insert needs
 *   Match    what match returns: length, page ids (the buffer protocol, int32),
 *            and the handle that lock / unlock take
 *   _command a radixkv command (cache-sim, run) run in this process, the GIL
 *            released, its stderr captured and SIGINT/SIGTERM routed to the
 *            command's own stop flag (interrupt.h) for the call's duration
 *
 * Ownership: a Cache owns its pool and cache; a Match holds a reference to its
 * Cache, so the Cache outlives every Match. A Match handle names a node that
 * only a lock keeps alive: it may be locked only while no evict, reset or
 * close happened since it was made (the Cache's epoch), and it is unlocked at
 * most once. A Match that is collected while locked unlocks itself, so a
 * dropped reference never pins pages for the cache's life.
 *
 * Errors: every library status becomes an exception carrying the library's
 * message (radixkv.Error, a RuntimeError; ValueError for bad arguments;
 * MemoryError; radixkv.OutOfPages when the pool has too few free pages).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "block_hash.h"
#include "cache.h"
#include "cache_kinds.h"
#include "commands.h"
#include "ev_sha256.h"
#include "evict_policy.h"
#include "interrupt.h"
#include "page_pool.h"
#include "radix_tree.h"
#include "rkv_core.h"
#include "trace.h"
#ifdef RKV_FAULT_INJECTION
#include "fault_alloc.h"
#endif

static PyObject *rkv_error;       /* radixkv.Error(RuntimeError) */
static PyObject *rkv_out_of_pages; /* radixkv.OutOfPages(radixkv.Error) */
static PyObject *numpy_frombuffer; /* numpy.frombuffer, or NULL without numpy */
static PyObject *numpy_int32;
static PyObject *numpy_int64;

/* A library status as an exception; msg is the library's message (or NULL). */
static PyObject *raise_status(rkv_status st, const char *where, const char *msg)
{
    const char *text = msg && msg[0] ? msg : rkv_status_str(st);
    PyObject *type = st == RKV_ENOMEM ? PyExc_MemoryError
                   : st == RKV_EINVAL || st == RKV_ERANGE ? PyExc_ValueError
                   : st == RKV_ENOSPC ? rkv_out_of_pages : rkv_error;
    PyErr_Format(type, "%s: %s", where, text);
    return NULL;
}

/* ---- token and page arrays --------------------------------------------- */

/* An int32 array converted from a Python object: data points either into the
 * object's own buffer (int32, C-contiguous) or into owned memory. */
typedef struct ids {
    const int32_t *data;
    Py_ssize_t n;
    int32_t *owned;
    Py_buffer view;
    int have_view;
} ids;

static void ids_release(ids *a)
{
    free(a->owned);
    a->owned = NULL;
    if (a->have_view) PyBuffer_Release(&a->view);
    a->have_view = 0;
}

/* The buffer's item kind: 's' signed, 'u' unsigned, 0 not an integer. */
static char format_kind(const char *f, Py_ssize_t itemsize)
{
    if (!f) return 'u'; /* unsigned bytes, by the protocol's definition */
    while (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '!') f++;
    if (!f[0] || f[1]) return 0;
    if (strchr("bhilq", f[0])) return 's';
    if (strchr("BHILQ", f[0])) return 'u';
    (void)itemsize;
    return 0;
}

/* src[0..n) narrowed into dst; 1 when some id is outside [0, hi] (hi <=
 * INT32_MAX). Shifts and 32-bit compares only, in blocks of 8 with a fixed
 * inner count, so that -O2's cheap vectorizer takes it on the SSE2 baseline
 * (a 64-bit compare, or a loop of unknown count, stays scalar there: ~10
 * instructions a token). */
static int narrow_ids(const int64_t *restrict src, int32_t *restrict dst, Py_ssize_t n,
                      int64_t hi)
{
    const int32_t top = (int32_t)hi;
    uint64_t wide = 0; /* any bit at 31 or above: negative or past INT32_MAX */
    int32_t over = 0;  /* past hi */
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            uint64_t x = (uint64_t)src[i + k];
            wide |= x >> 31;
            int32_t y = (int32_t)x;
            over |= y > top;
            dst[i + k] = y;
        }
    for (; i < n; i++) {
        wide |= (uint64_t)src[i] >> 31;
        over |= (int32_t)src[i] > top;
        dst[i] = (int32_t)src[i];
    }
    return wide != 0 || over != 0;
}

/* 1 when some id of src[0..n) is outside [0, hi]: the in-place int32 route's
 * check, a sign OR and a signed compare in blocks of 8 (a fixed inner count,
 * which -O2's cheap vectorizer takes on the SSE2 baseline), where the
 * general loop below spent ~10 instructions an id: Cache.insert of numpy
 * int32 tokens and pages (~2,200 of each on sglang_cache_bench's keys)
 * 4.7 -> 2.65 us a call. */
static int ids32_out_of_range(const int32_t *src, Py_ssize_t n, int64_t hi)
{
    if (hi < 0) return n > 0;
    const int32_t top = hi > INT32_MAX ? INT32_MAX : (int32_t)hi;
    int32_t sign = 0, over = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            sign |= src[i + k];
            over |= src[i + k] > top;
        }
    for (; i < n; i++) {
        sign |= src[i];
        over |= src[i] > top;
    }
    return sign < 0 || over != 0;
}

/* The ids of a buffer of integers (array, numpy array, memoryview) into a: read
 * in place when already contiguous aligned int32, else converted. 0, or -1
 * with the exception set and nothing held. */
static int ids_from_buffer(PyObject *obj, const char *what, int64_t hi, ids *a)
{
    if (PyObject_GetBuffer(obj, &a->view, PyBUF_RECORDS_RO) < 0) return -1;
    a->have_view = 1;
    Py_buffer *v = &a->view;
    char k = format_kind(v->format, v->itemsize);
    if (v->ndim > 1 || !k || (v->itemsize != 1 && v->itemsize != 2 && v->itemsize != 4
                              && v->itemsize != 8)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-D buffer of integers, got format '%s'"
                     " (%zd-byte items, %d dimensions)", what, v->format ? v->format : "B",
                     v->itemsize, v->ndim);
        ids_release(a);
        return -1;
    }
    Py_ssize_t n = v->itemsize ? v->len / v->itemsize : 0;
    /* A strided view (numpy's a[::2]) is read through its stride. */
    Py_ssize_t stride = v->ndim == 1 && v->strides ? v->strides[0] : v->itemsize;
    if (n > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: %zd ids (at most %d)", what, n, INT32_MAX);
        ids_release(a);
        return -1;
    }
    a->n = n;
    int direct = k == 's' && v->itemsize == 4 && stride == 4 && ((uintptr_t)v->buf % 4) == 0;
    /* Read in place: checked in one pass; the loop below runs only to name a
     * bad id. */
    if (direct && !ids32_out_of_range(v->buf, n, hi)) {
        a->data = (const int32_t *)v->buf;
        return 0;
    }
    if (!direct && !(a->owned = malloc(sizeof(int32_t) * (size_t)(n ? n : 1)))) {
        ids_release(a);
        PyErr_NoMemory();
        return -1;
    }
    /* Contiguous int64 (array('q'), SGLang's token arrays, numpy's
     * default): one branch-free pass, a second only to name a bad id. */
    if (k == 's' && v->itemsize == 8 && stride == 8 && ((uintptr_t)v->buf % 8) == 0) {
        if (!narrow_ids(v->buf, a->owned, n, hi)) {
            a->data = a->owned;
            return 0;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *p = (const char *)v->buf + i * stride;
        int64_t x;
        if (k == 's') {
            switch (v->itemsize) {
            case 1: x = *(const int8_t *)p; break;
            case 2: { int16_t t; memcpy(&t, p, 2); x = t; break; }
            case 4: { int32_t t; memcpy(&t, p, 4); x = t; break; }
            default: memcpy(&x, p, 8); break;
            }
        } else {
            uint64_t u;
            switch (v->itemsize) {
            case 1: u = *(const uint8_t *)p; break;
            case 2: { uint16_t t; memcpy(&t, p, 2); u = t; break; }
            case 4: { uint32_t t; memcpy(&t, p, 4); u = t; break; }
            default: memcpy(&u, p, 8); break;
            }
            x = u > (uint64_t)INT64_MAX ? -1 : (int64_t)u;
            if (u > (uint64_t)INT64_MAX) {
                PyErr_Format(PyExc_ValueError, "%s[%zd]: %llu is out of range [0, %lld]", what,
                             i, (unsigned long long)u, (long long)hi);
                ids_release(a);
                return -1;
            }
        }
        if (x < 0 || x > hi) {
            PyErr_Format(PyExc_ValueError, "%s[%zd]: %lld is out of range [0, %lld]", what, i,
                         (long long)x, (long long)hi);
            ids_release(a);
            return -1;
        }
        if (!direct) a->owned[i] = (int32_t)x;
    }
    a->data = direct ? (const int32_t *)v->buf : a->owned;
    return 0;
}

/* The ids of a list, tuple or other sequence of ints into a. 0, or -1 with
 * the exception set and nothing held. */
static int ids_from_sequence(PyObject *obj, const char *what, int64_t hi, ids *a)
{
    PyObject *seq = PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s: expected integer ids (list, array, numpy), got %s",
                     what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > INT32_MAX) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s: %zd ids (at most %d)", what, n, INT32_MAX);
        return -1;
    }
    if (!(a->owned = malloc(sizeof(int32_t) * (size_t)(n ? n : 1)))) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyLong_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "%s[%zd]: expected an int, got %s", what, i,
                         Py_TYPE(items[i])->tp_name);
            goto fail;
        }
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(items[i], &overflow);
        if (overflow || x < 0 || x > hi) {
            if (overflow)
                PyErr_Format(PyExc_ValueError, "%s[%zd]: out of range [0, %lld]", what, i,
                             (long long)hi);
            else
                PyErr_Format(PyExc_ValueError, "%s[%zd]: %lld is out of range [0, %lld]", what,
                             i, x, (long long)hi);
            goto fail;
        }
        a->owned[i] = (int32_t)x;
    }
    Py_DECREF(seq);
    a->n = n;
    a->data = a->owned;
    return 0;
fail:
    Py_DECREF(seq);
    ids_release(a);
    return -1;
}

/* obj (buffer of integers, list, tuple, array, numpy array) into a; every id
 * in [0, hi]. what names the argument in messages. 0 on success, -1 with the
 * exception set. */
static int ids_from(PyObject *obj, const char *what, int64_t hi, ids *a)
{
    memset(a, 0, sizeof *a);
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyByteArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected integer ids (list, array, numpy), got %s",
                     what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (PyObject_CheckBuffer(obj)) return ids_from_buffer(obj, what, hi, a);
    return ids_from_sequence(obj, what, hi, a);
}

/* A namespace argument: an int in [0, 2^64) or a name (hashed as a trace's
 * "namespace" field is). */
static int namespace_from(PyObject *obj, uint64_t *ns)
{
    if (!obj || obj == Py_None) {
        *ns = 0;
        return 0;
    }
    if (PyUnicode_Check(obj)) {
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(obj, &len);
        if (!s) return -1;
        *ns = trace_namespace_id(s, (size_t)len);
        return 0;
    }
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "namespace: expected an int or a str, got %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "namespace: expected an int in [0, 2**64)");
        return -1;
    }
    *ns = v;
    return 0;
}

/* ---- Cache ---------------------------------------------------------------- */

/* A SHA-256 digest's bytes: SGLang's KV-event chain digest of a page. */
enum { EV_DIGEST = 32 };

/* A page's flags in vals_set. Page ids are reused: a page evicted and
 * adopted again keeps its old owner's values, tag and digest in the
 * tables, so each flag says whether the table's entry is the present
 * owner's. Both are cleared wherever a page is adopted or freed (and on
 * reset; the table's growth adds pages with none), so a flag set means
 * "stored since the page's latest adoption":
 *   VALS_HAVE    its values (kv_insert stored them when it adopted the page)
 *   VALS_DIGEST  its digest and tag (kv_event_store stored them after that;
 *                kv_set_tags clears it, as the tag is then not the digest's) */
enum { VALS_HAVE = 1, VALS_DIGEST = 2 };

typedef struct CacheObject {
    PyObject_HEAD
    page_pool pool;
    cache *c;             /* NULL once closed */
    char *kind, *policy, *hash_fn, *hash_duplicates; /* owned copies for reset */
    int32_t page_size, num_pages;
    uint64_t epoch;       /* +1 at every evict, reset and close: stale handles */
    uint64_t generation;  /* +1 at every reset and close: stale locks */
    /* The caller's values per page (SGLang's KV indices: page_size int64s
     * per page id), for the kv_* methods; grown on demand, kept across
     * reset (only cached pages' values are ever read). */
    int64_t *vals;
    uint8_t *vals_set;    /* per page: VALS_HAVE | VALS_DIGEST flags (above) */
    int64_t *vals_tag;    /* per page: one more value (SGLang's event block hash);
                             NULL until a tag is stored (all tags 0) */
    uint8_t *vals_dig;    /* per page: EV_DIGEST bytes, the SHA-256 chain digest
                             kv_event_store hashed the page's tag from (the next
                             page's prior); NULL until one is stored; a page's
                             counts only under VALS_DIGEST */
    /* Bit q of vals_run (page q's bit) set: page q's values are page q-1's,
     * each + page_size, so page q continues an arithmetic run of values
     * (SGLang's KV indices mostly are: its allocator hands out consecutive
     * slots). Kept for every stored value by vals_runs_mark, whatever the
     * set flags say; a 0 is always safe (the value is read), a 1 only when
     * true. The gathers read the bits and only a run's first page. */
    uint64_t *vals_run;
    int64_t vals_pages;
    /* 0 while every page the tree holds took its values from a kv_insert
     * (the adapter's case): then kv_values and kv_evict need not read the
     * set flags of a path's pages to know they hold values (one memchr over
     * ~6,000 flags a call, mostly out of cache). Set for good by anything
     * that may leave a cached page without values (insert(), or a kv_insert
     * that failed after the tree adopted its pages: each such call sets it
     * first and puts it back only on success); cleared with the tree
     * (cache_build). The set flags are kept either way. */
    int vals_partial;
} CacheObject;

typedef struct MatchObject {
    PyObject_HEAD
    CacheObject *owner;
    cache_seq m;
    uint64_t epoch, generation;
    Py_ssize_t exports; /* buffer views alive */
    Py_ssize_t shape;   /* num_pages, for the buffer's shape */
    /* A kv_match over int64 ids keeps the matched pages as the tree's runs
     * (cache_radix_match64) and lists them in m.pages only when asked
     * (match_pages()): SGLang's match needs only its length, and its KV
     * indices are gathered a run at a time (kv_values), so a page table
     * per match was work nobody read. runs_only: m.num_pages is 0 until then. */
    radix_page_run *runs; /* (nruns) run_buf or owned */
    int32_t nruns;
    int runs_only;
    radix_page_run run_buf[4];
} MatchObject;

static PyTypeObject CacheType, MatchType;

static int cache_closed(CacheObject *self)
{
    if (self->c) return 0;
    PyErr_SetString(PyExc_ValueError, "radixkv.Cache: the cache is closed");
    return 1;
}

/* The (tokens, namespace) arguments of every method that takes a key: the
 * cache still open, the namespace converted, the tokens as int32 (release
 * *t with ids_release() after 0; nothing to release after -1). what names
 * the tokens in messages. */
static int key_from(CacheObject *self, PyObject *tok, PyObject *nso, const char *what,
                    uint64_t *ns, ids *t)
{
    if (cache_closed(self) || namespace_from(nso, ns) < 0) return -1;
    return ids_from(tok, what, INT32_MAX, t);
}

static char *dup_opt(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void cache_free_names(CacheObject *self)
{
    free(self->kind);
    free(self->policy);
    free(self->hash_fn);
    free(self->hash_duplicates);
    self->kind = self->policy = self->hash_fn = self->hash_duplicates = NULL;
}

/* Pool and cache from the stored configuration; -1 with the exception set. */
static int cache_build(CacheObject *self)
{
    char err[512] = "";
    rkv_status st = page_pool_init(&self->pool, self->num_pages, self->page_size);
    if (st != RKV_OK) {
        raise_status(st, "radixkv.Cache", "cannot allocate the page pool");
        return -1;
    }
    cache_config cfg = {.kind = self->kind, .policy = self->policy, .hash_fn = self->hash_fn,
                        .hash_duplicates = self->hash_duplicates};
    self->vals_partial = 0; /* an empty tree */
    st = cache_create(&cfg, &self->pool, &self->c, err, sizeof err);
    if (st != RKV_OK) {
        page_pool_destroy(&self->pool);
        self->c = NULL;
        raise_status(st, "radixkv.Cache", err);
        return -1;
    }
    return 0;
}

static void cache_teardown(CacheObject *self)
{
    if (!self->c) return;
    cache_destroy(self->c);
    page_pool_destroy(&self->pool);
    self->c = NULL;
    self->epoch++;
    self->generation++;
}

static void vals_release(CacheObject *self);

static int Cache_init(CacheObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"kind", "page_size", "num_pages", "policy", "hash_fn",
                            "hash_duplicates", NULL};
    const char *kind = NULL, *policy = NULL, *hash_fn = NULL, *dups = NULL;
    long long page_size = 1, num_pages = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|zLL$zzz:Cache", names, &kind, &page_size,
                                     &num_pages, &policy, &hash_fn, &dups))
        return -1;
    if (page_size < 1 || page_size > (1 << 20)) {
        PyErr_Format(PyExc_ValueError, "radixkv.Cache: page_size %lld is out of range [1, %d]",
                     page_size, 1 << 20);
        return -1;
    }
    if (num_pages < 1 || num_pages > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "radixkv.Cache: num_pages %lld is out of range [1, %d]",
                     num_pages, INT32_MAX);
        return -1;
    }
    cache_teardown(self);
    cache_free_names(self);
    self->kind = dup_opt(kind);
    self->policy = dup_opt(policy);
    self->hash_fn = dup_opt(hash_fn);
    self->hash_duplicates = dup_opt(dups);
    if ((kind && !self->kind) || (policy && !self->policy) || (hash_fn && !self->hash_fn)
        || (dups && !self->hash_duplicates)) {
        PyErr_NoMemory();
        return -1;
    }
    vals_release(self); /* before page_size changes: its sizes use the old one */
    self->page_size = (int32_t)page_size;
    self->num_pages = (int32_t)num_pages;
    return cache_build(self);
}

static void vals_forget_since(CacheObject *self, uint64_t mark);

static void Cache_dealloc(CacheObject *self)
{
    vals_release(self);
    cache_teardown(self);
    cache_free_names(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Page ids as numpy.int32 when numpy is installed, else as a memoryview of
 * the match (format 'i'). */
static PyObject *pages_object(PyObject *buffer_owner)
{
    if (numpy_frombuffer)
        return PyObject_CallFunctionObjArgs(numpy_frombuffer, buffer_owner, numpy_int32, NULL);
    return PyMemoryView_FromObject(buffer_owner);
}

static PyObject *Cache_match(CacheObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"tokens", "namespace", NULL};
    PyObject *tok, *nso = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:match", names, &tok, &nso)) return NULL;
    uint64_t ns;
    ids t;
    if (key_from(self, tok, nso, "tokens", &ns, &t) < 0) return NULL;
    MatchObject *m = PyObject_New(MatchObject, &MatchType);
    if (!m) {
        ids_release(&t);
        return NULL;
    }
    cache_seq_init(&m->m, 0, 0);
    m->owner = self;
    Py_INCREF(self);
    m->epoch = self->epoch;
    m->generation = self->generation;
    m->exports = 0;
    m->runs = NULL;
    m->nruns = 0;
    m->runs_only = 0;
    m->m.ns = ns;
    rkv_status st = cache_match_prefix(self->c, &m->m, t.data, (int32_t)t.n);
    ids_release(&t);
    if (st != RKV_OK) {
        Py_DECREF(m);
        return raise_status(st, "radixkv.Cache.match", NULL);
    }
    return (PyObject *)m;
}

static PyObject *Cache_insert(CacheObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"tokens", "pages", "namespace", NULL};
    PyObject *tok, *pg, *nso = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:insert", names, &tok, &pg, &nso))
        return NULL;
    uint64_t ns;
    ids t, p;
    if (key_from(self, tok, nso, "tokens", &ns, &t) < 0) return NULL;
    if (ids_from(pg, "pages", self->num_pages - 1, &p) < 0) {
        ids_release(&t);
        return NULL;
    }
    Py_ssize_t need = t.n / self->page_size;
    if (p.n < need) {
        PyErr_Format(PyExc_ValueError, "radixkv.Cache.insert: %zd tokens need %zd pages of %d "
                     "tokens, got %zd", t.n, need, self->page_size, p.n);
        ids_release(&t);
        ids_release(&p);
        return NULL;
    }
    int32_t prefix = 0;
    self->vals_partial = 1; /* the pages it adopts have no values */
    rkv_status st = cache_insert(self->c, &(cache_seq){.ns = ns}, t.data, (int32_t)t.n, p.data,
                                 &prefix);
    /* The pages it adopted (past the prefix, the cache's now; all were in
     * flight) have no values and no digest, whatever an earlier owner left
     * in their flags (a free whose log was lost could not clear them). */
    if (st == RKV_OK && self->vals_set)
        for (Py_ssize_t j = prefix / self->page_size; j < need; j++)
            if (p.data[j] < self->vals_pages
                && page_pool_state(&self->pool, p.data[j]) == PAGE_CACHED)
                self->vals_set[p.data[j]] = 0;
    ids_release(&t);
    ids_release(&p);
    if (st != RKV_OK)
        return raise_status(st, "radixkv.Cache.insert",
                            st == RKV_EINVAL ? "a page beyond the cached prefix is not in flight"
                                               " (allocate it with alloc())" : NULL);
    return PyLong_FromLong(prefix);
}

static MatchObject *match_arg(CacheObject *self, PyObject *arg, const char *what)
{
    if (!PyObject_TypeCheck(arg, &MatchType)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a radixkv.Match, got %s", what,
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    MatchObject *m = (MatchObject *)arg;
    if (m->owner != self) {
        PyErr_Format(PyExc_ValueError, "%s: the match belongs to another cache", what);
        return NULL;
    }
    if (m->generation != self->generation) {
        PyErr_Format(PyExc_ValueError, "%s: the match was made before the cache was reset or "
                     "closed", what);
        return NULL;
    }
    return m;
}

static PyObject *Cache_lock(CacheObject *self, PyObject *arg)
{
    if (cache_closed(self)) return NULL;
    MatchObject *m = match_arg(self, arg, "radixkv.Cache.lock");
    if (!m) return NULL;
    /* A locked handle cannot have been evicted; an unlocked one only while
     * nothing was evicted since the match. */
    if (!m->m.locks && m->epoch != self->epoch) {
        PyErr_SetString(PyExc_ValueError, "radixkv.Cache.lock: the cache evicted since this match "
                        "was made, so its entries may be gone; match again");
        return NULL;
    }
    rkv_status st = cache_lock(self->c, &m->m);
    if (st != RKV_OK) return raise_status(st, "radixkv.Cache.lock", NULL);
    Py_RETURN_NONE;
}

static PyObject *Cache_unlock(CacheObject *self, PyObject *arg)
{
    if (cache_closed(self)) return NULL;
    MatchObject *m = match_arg(self, arg, "radixkv.Cache.unlock");
    if (!m) return NULL;
    if (!m->m.locks) {
        PyErr_SetString(PyExc_ValueError, "radixkv.Cache.unlock: the match is not locked");
        return NULL;
    }
    rkv_status st = cache_unlock(self->c, &m->m);
    if (st != RKV_OK) return raise_status(st, "radixkv.Cache.unlock", NULL);
    Py_RETURN_NONE;
}

static PyObject *Cache_evict(CacheObject *self, PyObject *arg)
{
    if (cache_closed(self)) return NULL;
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "radixkv.Cache.evict: %lld tokens (need >= 0)", n);
        return NULL;
    }
    self->epoch++;
    uint64_t mark = page_pool_free_mark(&self->pool);
    int64_t freed = cache_evict(self->c, n);
    vals_forget_since(self, mark);
    return PyLong_FromLongLong(freed);
}

static PyObject *pages_from_array(const int32_t *pages, int32_t n);
static PyObject *pages_from_runs(const page_run *runs, int32_t nruns, int64_t n);

/* evict, and the page ids it freed in the order the kind freed them (the
 * pool's free log since a mark): what a caller storing its own values per
 * page (SGLang's KV indices) must release. */
static PyObject *Cache_evict_pages(CacheObject *self, PyObject *arg)
{
    if (cache_closed(self)) return NULL;
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "radixkv.Cache.evict_pages: %lld tokens (need >= 0)", n);
        return NULL;
    }
    self->epoch++;
    uint64_t mark = page_pool_free_mark(&self->pool);
    int64_t freed = cache_evict(self->c, n);
    const page_run *runs = NULL;
    int32_t nruns = 0;
    vals_forget_since(self, mark); /* whatever the free log says: the eviction happened */
    rkv_status st = page_pool_freed_since(&self->pool, mark, &runs, &nruns);
    if (st != RKV_OK) return raise_status(st, "radixkv.Cache.evict_pages", "the free log");
    PyObject *p = pages_from_runs(runs, nruns, (int64_t)(self->pool.freed_total - mark));
    if (!p) return NULL;
    PyObject *r = Py_BuildValue("(LN)", (long long)freed, p);
    return r;
}

static PyObject *pages_from_bytes(PyObject *b);

/* A fresh int32 buffer of n pages as the pages object (numpy or memoryview). */
static PyObject *pages_from_array(const int32_t *pages, int32_t n)
{
    return pages_from_bytes(
        PyBytes_FromStringAndSize((const char *)pages, (Py_ssize_t)sizeof(int32_t) * n));
}

/* The same for the pages of runs[0..nruns), n in all, first to last. */
static PyObject *pages_from_runs(const page_run *runs, int32_t nruns, int64_t n)
{
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int32_t) * n);
    if (!b) return NULL;
    int32_t *out = (int32_t *)PyBytes_AS_STRING(b);
    for (int32_t k = 0; k < nruns; k++)
        for (int32_t i = 0; i < runs[k].count; i++) *out++ = runs[k].first + i;
    return pages_from_bytes(b);
}

/* int32 pages in bytes b (a new reference, taken; NULL: passed on) as the
 * pages object. */
static PyObject *pages_from_bytes(PyObject *b)
{
    if (!b) return NULL;
    PyObject *r;
    if (numpy_frombuffer) {
        r = PyObject_CallFunctionObjArgs(numpy_frombuffer, b, numpy_int32, NULL);
    } else {
        PyObject *mv = PyMemoryView_FromObject(b);
        r = mv ? PyObject_CallMethod(mv, "cast", "s", "i") : NULL;
        Py_XDECREF(mv);
    }
    Py_DECREF(b);
    return r;
}

static PyObject *Cache_alloc(CacheObject *self, PyObject *arg)
{
    if (cache_closed(self)) return NULL;
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0 || n > self->num_pages) {
        PyErr_Format(PyExc_ValueError, "radixkv.Cache.alloc: %lld pages (the pool has %d)", n,
                     self->num_pages);
        return NULL;
    }
    int32_t *out = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!out) return PyErr_NoMemory();
    rkv_status st = page_pool_alloc(&self->pool, (int32_t)n, out);
    if (st != RKV_OK) {
        free(out);
        char msg[128];
        snprintf(msg, sizeof msg, "%lld pages asked, %d free (evict first)", n,
                 page_pool_num_free(&self->pool));
        return raise_status(st, "radixkv.Cache.alloc", msg);
    }
    PyObject *r = pages_from_array(out, (int32_t)n);
    if (!r) page_pool_free(&self->pool, out, (int32_t)n);
    free(out);
    return r;
}

static PyObject *Cache_free(CacheObject *self, PyObject *arg)
{
    if (cache_closed(self)) return NULL;
    ids p;
    if (ids_from(arg, "pages", self->num_pages - 1, &p) < 0) return NULL;
    /* Only pages in flight: a cached page belongs to the cache (evict it). */
    for (Py_ssize_t i = 0; i < p.n; i++)
        if (page_pool_state(&self->pool, p.data[i]) != PAGE_INFLIGHT) {
            PyErr_Format(PyExc_ValueError, "radixkv.Cache.free: pages[%zd] = %d is %s, not in "
                         "flight", i, p.data[i],
                         page_pool_state(&self->pool, p.data[i]) == PAGE_FREE ? "free" : "the cache's");
            ids_release(&p);
            return NULL;
        }
    rkv_status st = page_pool_free(&self->pool, p.data, (int32_t)p.n);
    ids_release(&p);
    if (st != RKV_OK) return raise_status(st, "radixkv.Cache.free", "a page named twice");
    Py_RETURN_NONE;
}

/* ---- values per page (kv_*) -------------------------------------------------
 * What a caller that keeps its own value per cached token (SGLang's KV
 * indices) would otherwise do in Python around every call: store the values of
 * the pages an insert adopts, gather a matched path's values, and hand back
 * the values of the pages an evict freed. One C call each, so no per-page
 * Python objects and no tensor arithmetic per call (radixkv.sglang). */

/* The per-page tables (values, set flags, tags) come zeroed from
 * table_alloc and go back through table_free with the same byte count.
 * Zeroed by the allocator rather than by memset: a large block comes zeroed
 * from the kernel, so a grown part costs nothing until a page id there is
 * used (page ids reach far past the cached pages' count in a large pool, and
 * zeroing all of it was most of a fresh adapter's insert time).
 * A table of 2 MiB or more is its own mapping, 2 MiB-aligned and advised
 * MADV_HUGEPAGE where Linux has it (THP's "madvise" mode): the replay reads
 * a path's values 48-64 KB at a time and evict's gather ~17 KB from pages
 * spread over a 38 MB table, each 4 KiB page of it a TLB miss of its own.
 * The advice may be ignored (THP off, no huge page free): then the mapping
 * is plain 4 KiB pages, the same as calloc's. Smaller tables stay calloc's,
 * where the sanitizers see them. */
#if defined(__linux__) && defined(MADV_HUGEPAGE)
#define TABLE_HUGE ((size_t)2 << 20)
#endif

static void *table_alloc(size_t bytes)
{
#ifdef TABLE_HUGE
    if (bytes >= TABLE_HUGE) {
        size_t len = (bytes + TABLE_HUGE - 1) & ~(TABLE_HUGE - 1);
        char *p = mmap(NULL, len + TABLE_HUGE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        /* Keep the aligned len bytes inside, unmap the head and tail. */
        size_t head = (TABLE_HUGE - ((uintptr_t)p & (TABLE_HUGE - 1))) & (TABLE_HUGE - 1);
        if (head) munmap(p, head);
        munmap(p + head + len, TABLE_HUGE - head);
        p += head;
        (void)madvise(p, len, MADV_HUGEPAGE); /* advice: 4 KiB pages if refused */
        return p;
    }
#endif
    return calloc(1, bytes ? bytes : 1);
}

static void table_free(void *p, size_t bytes)
{
    if (!p) return;
#ifdef TABLE_HUGE
    if (bytes >= TABLE_HUGE) {
        munmap(p, (bytes + TABLE_HUGE - 1) & ~(TABLE_HUGE - 1));
        return;
    }
#endif
    (void)bytes;
    free(p);
}

/* The tables' sizes for a capacity of pages page ids. */
static size_t vals_bytes(const CacheObject *self, int64_t pages)
{
    return sizeof(int64_t) * (size_t)pages * (size_t)self->page_size;
}

static size_t run_bytes(int64_t pages)
{
    return sizeof(uint64_t) * (((size_t)pages + 63) / 64);
}

/* Every per-page table freed (the capacity back to 0). */
static void vals_release(CacheObject *self)
{
    size_t n = (size_t)self->vals_pages;
    table_free(self->vals, vals_bytes(self, self->vals_pages));
    table_free(self->vals_set, n);
    table_free(self->vals_tag, sizeof(int64_t) * n);
    table_free(self->vals_dig, EV_DIGEST * n);
    table_free(self->vals_run, run_bytes(self->vals_pages));
    self->vals = NULL;
    self->vals_set = NULL;
    self->vals_tag = NULL;
    self->vals_dig = NULL;
    self->vals_run = NULL;
    self->vals_pages = 0;
}

/* Room for page ids < pages in self->vals (and vals_set, vals_tag and
 * vals_dig when in use); -1 with MemoryError, every table as it was. */
static int vals_reserve(CacheObject *self, int64_t pages)
{
    if (pages <= self->vals_pages) return 0;
    int64_t cap = self->vals_pages ? self->vals_pages : 1024;
    while (cap < pages) cap *= 2;
    if (cap > self->num_pages) cap = self->num_pages;
    const size_t had = (size_t)self->vals_pages, n = (size_t)cap;
    /* All new tables first, so that a failure leaves the old ones whole
     * (table_free needs each table's size, which vals_pages gives). */
    int64_t *v = table_alloc(vals_bytes(self, cap));
    uint8_t *set = table_alloc(n);
    int64_t *tag = self->vals_tag ? table_alloc(sizeof(int64_t) * n) : NULL;
    uint8_t *dig = self->vals_dig ? table_alloc(EV_DIGEST * n) : NULL;
    uint64_t *run = table_alloc(run_bytes(cap));
    if (!v || !set || (self->vals_tag && !tag) || (self->vals_dig && !dig) || !run) {
        table_free(v, vals_bytes(self, cap));
        table_free(set, n);
        table_free(tag, sizeof(int64_t) * n);
        table_free(dig, EV_DIGEST * n);
        table_free(run, run_bytes(cap));
        PyErr_NoMemory();
        return -1;
    }
    if (had) {
        memcpy(v, self->vals, vals_bytes(self, self->vals_pages));
        memcpy(set, self->vals_set, had);
        if (tag) memcpy(tag, self->vals_tag, sizeof(int64_t) * had);
        if (dig) memcpy(dig, self->vals_dig, EV_DIGEST * had);
        /* The old bits whole; the grown pages' are 0 (no values there). */
        memcpy(run, self->vals_run, run_bytes(self->vals_pages));
    }
    vals_release(self);
    self->vals = v;
    self->vals_set = set;
    self->vals_tag = tag;
    self->vals_dig = dig;
    self->vals_run = run;
    self->vals_pages = cap;
    return 0;
}

/* kv_reserve(): the value table (and its set flags) for every page of the
 * pool now, each 4 KiB of it written once. A fresh table maps its memory
 * on first write: one fault per 512 values, about half of an insert's time
 * on a fresh cache (sglang_cache_bench's replay: 21 us per insert fresh,
 * 10 us on a reset() cache whose table is mapped). An engine sizes and
 * touches its KV pools at start; a cache that lives as long does the same
 * for its table here, and no insert grows it later. */
static PyObject *Cache_kv_reserve(CacheObject *self, PyObject *unused)
{
    if (cache_closed(self)) return NULL;
    size_t P = (size_t)self->page_size, had = (size_t)self->vals_pages;
    if (vals_reserve(self, self->num_pages) < 0) return NULL;
    /* One write per 4 KiB, through volatile so the compiler keeps it: the
     * write maps the page. The part that may hold values (and set flags,
     * 0 past it) is written back as read; the part just grown, where no
     * value was stored, takes a 0 without the read, whose zero-page fault
     * would come before the write's. */
    volatile char *v = (volatile char *)self->vals, *set = (volatile char *)self->vals_set;
    size_t vbytes = sizeof(int64_t) * (size_t)self->vals_pages * P;
    size_t i = 0;
    for (; i < sizeof(int64_t) * had * P; i += 4096) v[i] = v[i];
    for (; i < vbytes; i += 4096) v[i] = 0;
    for (i = 0; i < had; i += 4096) set[i] = set[i];
    for (; i < (size_t)self->vals_pages; i += 4096) set[i] = 0;
    volatile char *run = (volatile char *)self->vals_run;
    for (i = 0; i < run_bytes(self->vals_pages); i += 4096) run[i] = run[i];
    Py_RETURN_NONE;
}

/* vals_tag in use (all 0), for a caller about to store a tag; -1 with
 * MemoryError. Only callers with events keep tags. */
static int tags_reserve(CacheObject *self)
{
    if (self->vals_tag || !self->vals_pages) return 0;
    if (!(self->vals_tag = table_alloc(sizeof(int64_t) * (size_t)self->vals_pages))) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The tag of page pg (0 while no tag was ever stored). */
static inline int64_t tag_of(const CacheObject *self, int32_t pg)
{
    return self->vals_tag ? self->vals_tag[pg] : 0;
}

/* The set flags of the pages of runs[0..nruns) cleared (those the table has). */
static void vals_unset_runs(CacheObject *self, const page_run *runs, int32_t nruns)
{
    const int64_t have = self->vals_pages;
    for (int32_t k = 0; k < nruns; k++) {
        const int64_t f = runs[k].first, e = f + runs[k].count;
        if (f < have) memset(self->vals_set + f, 0, (size_t)((e < have ? e : have) - f));
    }
}

/* The flags of every page the cache does not hold cleared: for an evict
 * whose free log was lost (the log could not grow), which cannot say which
 * pages it freed. Rare, and one pass over the pool's states. */
static void vals_forget_uncached(CacheObject *self)
{
    for (int64_t pg = 0; pg < self->vals_pages; pg++)
        if (self->vals_set[pg] && page_pool_state(&self->pool, (int32_t)pg) != PAGE_CACHED)
            self->vals_set[pg] = 0;
}

/* Pages freed since mark (any evict) no longer hold their values or digest:
 * a page an insert adopts later must not show the old ones. */
static void vals_forget_since(CacheObject *self, uint64_t mark)
{
    if (!self->vals_set) return;
    const page_run *runs = NULL;
    int32_t nruns = 0;
    if (page_pool_freed_since(&self->pool, mark, &runs, &nruns) != RKV_OK) {
        vals_forget_uncached(self);
        return;
    }
    vals_unset_runs(self, runs, nruns);
}

/* 1 when every page of pages[0..n) holds values kv_insert stored. */
static int vals_all_set(const CacheObject *self, const int32_t *pages, int32_t n)
{
    for (int32_t j = 0; j < n; j++)
        if (pages[j] >= self->vals_pages || !self->vals_set[pages[j]]) return 0;
    return 1;
}

/* Loops over long arrays that -O2 leaves scalar: written with GCC's vector
 * type (four int64 lanes) and, on x86-64, compiled twice, the AVX2 copy
 * chosen at load where the CPU has it. Unsigned: the values are the
 * caller's, any int64, and their differences wrap where signed ones would
 * overflow; the gathers' fill wraps the same way, so a bit set on wrapped
 * arithmetic still gives the stored value back. */
typedef uint64_t u64x4 __attribute__((vector_size(32)));

/* 1 when v[k] == v[k - 1] + 1 for every k in [1, n). */
RKV_WIDE static int vals_arithmetic(const int64_t *v, int64_t n)
{
    const u64x4 one = {1, 1, 1, 1};
    u64x4 d = {0, 0, 0, 0}, cur, prev;
    int64_t k = 1;
    for (; k + 4 <= n; k += 4) {
        memcpy(&cur, v + k, sizeof cur);
        memcpy(&prev, v + k - 1, sizeof prev);
        d |= (cur - prev) ^ one;
    }
    uint64_t r = d[0] | d[1] | d[2] | d[3];
    for (; k < n; k++) r |= ((uint64_t)v[k] - (uint64_t)v[k - 1]) ^ 1;
    return r == 0;
}

/* out[i] = start + i for i in [0, n). */
RKV_WIDE static void vals_fill_iota(int64_t *out, uint64_t start, int64_t n)
{
    u64x4 x = {start, start + 1, start + 2, start + 3};
    const u64x4 step = {4, 4, 4, 4};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        memcpy(out + i, &x, sizeof x);
        x += step;
    }
    for (; i < n; i++) out[i] = (int64_t)(start + (uint64_t)i);
}

/* 1 when the page at cur holds the values of the page at prev, each + P. */
static inline int pages_continue(const int64_t *prev, const int64_t *cur, int64_t P)
{
    uint64_t diff = 0;
    for (int64_t i = 0; i < P; i++) diff |= (uint64_t)cur[i] - (uint64_t)prev[i] - (uint64_t)P;
    return diff == 0;
}

/* Bit q of the run bits set to x. */
static inline void run_bit_put(uint64_t *bits, int64_t q, int x)
{
    bits[q >> 6] = (bits[q >> 6] & ~(1ull << (q & 63))) | ((uint64_t)x << (q & 63));
}

/* The run bits of pages [a, b] recomputed after a write of pages [a, b),
 * whose values are src[0, (b - a) * P) (the caller's buffer or the table):
 * the write changes their own bits and the next page's, b (whose values may
 * be a free page's old ones: its bit is then true of them, and a later
 * write of that page marks it again). Pages past the table have no bit. */
static void vals_runs_mark(CacheObject *self, int64_t a, int64_t b, const int64_t *src)
{
    const int64_t P = self->page_size;
    const int64_t *v = self->vals;
    uint64_t *bits = self->vals_run;
    if (P == 1 && b - a > 2 && vals_arithmetic(src, b - a)) {
        /* The common write, a run of values one arithmetic run: bits
         * a + 1 .. b - 1 set a word at a time. */
        for (int64_t q = a + 1; q < b;) {
            int64_t w = q >> 6, end = (w + 1) << 6;
            if (end > b) end = b;
            bits[w] |= (end - q == 64 ? ~0ull : ((1ull << (end - q)) - 1)) << (q & 63);
            q = end;
        }
    } else {
        for (int64_t q = a + 1; q < b; q++)
            run_bit_put(bits, q, pages_continue(src + (q - a - 1) * P, src + (q - a) * P, P));
    }
    /* The ends: page a against the page before it, page b against b - 1. */
    if (a >= 1) run_bit_put(bits, a, pages_continue(v + (a - 1) * P, src, P));
    if (b < self->vals_pages)
        run_bit_put(bits, b, pages_continue(src + (b - a - 1) * P, v + b * P, P));
}

/* Pages q, q + 1, ... while their run bit is bit, up to end: how many. */
static int64_t run_bits_stretch(const uint64_t *bits, int64_t q, int64_t end, int bit)
{
    const uint64_t flip = bit ? ~0ull : 0;
    int64_t at = q;
    while (at < end) {
        uint64_t w = (bits[at >> 6] ^ flip) >> (at & 63); /* 1: a page that differs */
        if (w) {
            at += __builtin_ctzll(w);
            break;
        }
        at = (at | 63) + 1;
    }
    return (at < end ? at : end) - q;
}

/* dst[0, count * P) = the values of pages first .. first + count - 1 (one
 * run of page ids), as a copy of the table would give them: a page whose
 * run bit is clear is copied, a page whose bit is set is the page before it
 * + P. The run's first page is always copied (its bit speaks of a page
 * outside the run). The copy of a long run read every value from a table
 * mostly out of cache (48-64 KB a path, 17 KB an evict); the bits are 1/512
 * of that at page size 1, and the values are read only at a run's starts. */
static void vals_gather_run(const CacheObject *self, int64_t *dst, int64_t first, int64_t count)
{
    const int64_t P = self->page_size;
    const int64_t *v = self->vals;
    const uint64_t *bits = self->vals_run;
    const int64_t end = first + count;
    if (count <= 0) return;
    memcpy(dst, v + first * P, sizeof(int64_t) * (size_t)P);
    int64_t *out = dst + P;
    for (int64_t q = first + 1; q < end;) {
        int bit = (int)(bits[q >> 6] >> (q & 63)) & 1;
        int64_t n = run_bits_stretch(bits, q, end, bit);
        if (!bit) {
            memcpy(out, v + q * P, sizeof(int64_t) * (size_t)(n * P));
        } else if (P == 1) {
            vals_fill_iota(out, (uint64_t)out[-1] + 1, n);
        } else {
            for (int64_t i = 0; i < n * P; i++)
                out[i] = (int64_t)((uint64_t)out[i - P] + (uint64_t)P);
        }
        out += n * P;
        q += n;
    }
#ifdef __SANITIZE_ADDRESS__
    /* The sanitizer build checks every gather against the plain copy. */
    for (int64_t i = 0; i < count * P; i++)
        if (dst[i] != v[first * P + i]) {
            fprintf(stderr, "radixkv: _radixkv.c vals_gather_run: pages %lld..%lld, value %lld "
                    "is %lld by the run bits, %lld in the table\n", (long long)first,
                    (long long)(end - 1), (long long)i, (long long)dst[i],
                    (long long)v[first * P + i]);
            abort();
        }
#endif
}

/* Values (a 1-D buffer of integers: numpy, array, a CPU tensor's .numpy())
 * read item by item through the buffer's stride. */
typedef struct vals_view {
    Py_buffer view;
    Py_ssize_t n, stride;
    char kind;
} vals_view;

/* The DLPack ABI's tensor as a "dltensor" capsule holds it (the unversioned
 * DLManagedTensor that torch.utils.dlpack.to_dlpack returns): declared here
 * from the DLPack specification, only the fields read. The capsule's owner
 * keeps the tensor alive as long as the capsule lives (the caller holds it
 * through the call), and its destructor frees it; reading does not consume. */
typedef struct {
    void *data;
    struct { int32_t device_type, device_id; } device;
    int32_t ndim;
    struct { uint8_t code, bits; uint16_t lanes; } dtype;
    int64_t *shape;
    int64_t *strides; /* in items; NULL: compact row-major */
    uint64_t byte_offset;
} dl_tensor;

enum { DL_CPU = 1, DL_INT = 0, DL_UINT = 1 };

/* A CPU tensor's values through its DLPack capsule: torch's to_dlpack is a
 * C call (~0.15 us), where tensor.numpy() builds a numpy array (~0.5 us) and
 * its buffer export follows; per insert on the adapter's path. */
static int vals_view_dlpack(PyObject *obj, const char *what, vals_view *v)
{
    const dl_tensor *t = PyCapsule_IsValid(obj, "dltensor")
                         ? PyCapsule_GetPointer(obj, "dltensor") : NULL;
    if (!t) {
        PyErr_Format(PyExc_TypeError, "%s: a capsule other than an unused DLPack \"dltensor\" "
                     "(named \"%s\")", what, PyCapsule_GetName(obj) ? PyCapsule_GetName(obj) : "");
        return -1;
    }
    int bits = t->dtype.bits;
    if (t->device.device_type != DL_CPU || t->ndim != 1 || t->dtype.lanes != 1
        || (t->dtype.code != DL_INT && t->dtype.code != DL_UINT)
        || (bits != 8 && bits != 16 && bits != 32 && bits != 64)) {
        PyErr_Format(PyExc_TypeError, "%s: expected the DLPack capsule of a 1-D CPU tensor of "
                     "integers, got device type %d, %d dimensions, type code %d of %d bits "
                     "(lanes %d)", what, (int)t->device.device_type, (int)t->ndim,
                     (int)t->dtype.code, bits, (int)t->dtype.lanes);
        return -1;
    }
    memset(&v->view, 0, sizeof v->view); /* obj NULL: PyBuffer_Release does nothing */
    v->view.itemsize = bits / 8;
    v->view.buf = (char *)t->data + t->byte_offset;
    v->kind = t->dtype.code == DL_INT ? 's' : 'u';
    v->n = (Py_ssize_t)t->shape[0];
    v->stride = (t->strides ? (Py_ssize_t)t->strides[0] : 1) * v->view.itemsize;
    v->view.len = v->n * v->view.itemsize;
    return 0;
}

static int vals_view_open(PyObject *obj, const char *what, vals_view *v)
{
    if (PyCapsule_CheckExact(obj)) return vals_view_dlpack(obj, what, v);
    if (PyObject_GetBuffer(obj, &v->view, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-D buffer of integers (numpy, array; a "
                     "tensor as tensor.numpy()), got %s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_buffer *b = &v->view;
    v->kind = format_kind(b->format, b->itemsize);
    if (b->ndim != 1 || !v->kind || (b->itemsize != 1 && b->itemsize != 2 && b->itemsize != 4
                                     && b->itemsize != 8)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-D buffer of integers, got format '%s' "
                     "(%zd-byte items, %d dimensions)", what, b->format ? b->format : "B",
                     b->itemsize, b->ndim);
        PyBuffer_Release(b);
        return -1;
    }
    v->n = b->shape ? b->shape[0] : b->len / b->itemsize;
    v->stride = b->strides ? b->strides[0] : b->itemsize;
    return 0;
}

static int64_t vals_view_get(const vals_view *v, Py_ssize_t i)
{
    const char *p = (const char *)v->view.buf + i * v->stride;
    switch (v->view.itemsize) {
    case 1: return v->kind == 's' ? *(const int8_t *)p : *(const uint8_t *)p;
    case 2: { int16_t t; memcpy(&t, p, 2); return v->kind == 's' ? t : (uint16_t)t; }
    case 4: { int32_t t; memcpy(&t, p, 4); return v->kind == 's' ? (int64_t)t : (int64_t)(uint32_t)t; }
    default: { int64_t t; memcpy(&t, p, 8); return t; }
    }
}

/* What kv_values and kv_evict hand out with dlpack=True: the DLPack ABI's
 * unversioned DLManagedTensor (the tensor, its manager's context, its
 * deleter), in one block with its shape and its int64 values, inside a
 * "dltensor" capsule. torch.from_dlpack wraps the values where they lie and
 * calls the deleter when the tensor dies; an unconsumed capsule frees the
 * block itself. The adapter's path_device_indices and evict each wanted a
 * tensor and got a numpy array (numpy.frombuffer over a bytearray, then
 * torch.from_numpy): two wrappers around one copy, about 1 us a call in the
 * replay of sglang_cache_bench. */
typedef struct dl_managed {
    dl_tensor t;
    void *ctx;
    void (*deleter)(struct dl_managed *);
    int64_t shape;
    size_t cap;     /* room in data, in values (>= shape) */
    int64_t data[]; /* (shape) */
} dl_managed;

/* A few blocks of results that died, kept for the next results: the
 * adapter's path_device_indices (~6,000 values) and evict (~2,000) each
 * hand out a block that dies within the request. From malloc each cost a
 * large allocation and free (glibc consolidates its small free chunks
 * before every large request) and wrote values into lines long out of
 * cache; a reused block was written a request ago. Slots taken and filled
 * by atomic exchange: a tensor may die on a thread without the GIL. */
enum { DL_SPARES = 4 };
#define DL_SPARE_MAX ((size_t)1 << 17) /* values; a larger block goes back to free */
static _Atomic(dl_managed *) dl_spare[DL_SPARES];

static void dl_managed_free(dl_managed *m)
{
    if (m->cap <= DL_SPARE_MAX)
        for (int i = 0; i < DL_SPARES; i++) {
            dl_managed *none = NULL;
            if (atomic_compare_exchange_strong(&dl_spare[i], &none, m)) return;
        }
    free(m);
}

/* A block with room for n values: a spare one if one fits, else a new one
 * (rounded up to a power of two values, so that later results of about
 * the same size fit it); NULL when out of memory. */
static dl_managed *dl_block(size_t n)
{
    for (int i = 0; i < DL_SPARES; i++) {
        if (!atomic_load_explicit(&dl_spare[i], memory_order_relaxed)) continue;
        dl_managed *m = atomic_exchange(&dl_spare[i], NULL);
        if (!m) continue;
        if (m->cap >= n) return m;
        dl_managed *none = NULL; /* too small for this one: back, or freed */
        if (!atomic_compare_exchange_strong(&dl_spare[i], &none, m)) free(m);
    }
    size_t cap = 64;
    while (cap < n) cap *= 2;
    if (cap > DL_SPARE_MAX) cap = n;
    dl_managed *m = malloc(sizeof *m + sizeof(int64_t) * cap);
    if (m) m->cap = cap;
    return m;
}

/* A consumer renames the capsule "used_dltensor" and owns the block then. */
static void dl_capsule_free(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, "dltensor")) return;
    dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter) m->deleter(m);
}

/* A "dltensor" capsule of n int64 values (1-D, CPU) to be written at *data
 * before the capsule is handed out; NULL with MemoryError. */
static PyObject *dl_int64_new(Py_ssize_t n, int64_t **data)
{
    dl_managed *m = dl_block((size_t)n);
    if (!m) return PyErr_NoMemory();
    size_t room = m->cap;
    memset(m, 0, sizeof *m);
    m->cap = room;
    m->t.data = m->data;
    m->t.device.device_type = DL_CPU;
    m->t.ndim = 1;
    m->t.dtype.code = DL_INT;
    m->t.dtype.bits = 64;
    m->t.dtype.lanes = 1;
    m->shape = (int64_t)n;
    m->t.shape = &m->shape;
    m->deleter = dl_managed_free;
    PyObject *cap = PyCapsule_New(m, "dltensor", dl_capsule_free);
    if (!cap) {
        dl_managed_free(m);
        return NULL;
    }
    *data = m->data;
    return cap;
}

/* An int64 result of n values, written at *data between out_int64_new() and
 * out_int64_done(): a DLPack capsule (dlpack), else a bytearray that
 * out_int64_done() wraps as numpy (or a memoryview of format 'q' without
 * numpy). Both NULL with the exception set; out_int64_done() takes o. */
static PyObject *out_int64_new(Py_ssize_t n, int dlpack, int64_t **data)
{
    if (dlpack) return dl_int64_new(n, data);
    PyObject *b = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * n);
    if (b) *data = (int64_t *)PyByteArray_AS_STRING(b);
    return b;
}

static PyObject *out_int64_done(PyObject *o, int dlpack)
{
    if (dlpack) return o;
    PyObject *r;
    if (numpy_frombuffer) {
        r = PyObject_CallFunctionObjArgs(numpy_frombuffer, o, numpy_int64, NULL);
    } else {
        PyObject *mv = PyMemoryView_FromObject(o);
        r = mv ? PyObject_CallMethod(mv, "cast", "s", "q") : NULL;
        Py_XDECREF(mv);
    }
    Py_DECREF(o);
    return r;
}

/* A fresh, writable int64 array of n values (numpy when installed, else a
 * memoryview of format 'q'). */
static PyObject *int64_array(const int64_t *src, Py_ssize_t n)
{
    int64_t *dst;
    PyObject *b = out_int64_new(n, 0, &dst);
    if (!b) return NULL;
    if (n) memcpy(dst, src, sizeof(int64_t) * (size_t)n);
    return out_int64_done(b, 0);
}

static MatchObject *match_new(CacheObject *self)
{
    MatchObject *m = PyObject_New(MatchObject, &MatchType);
    if (!m) return NULL;
    cache_seq_init(&m->m, 0, 0);
    m->owner = self;
    Py_INCREF(self);
    m->epoch = self->epoch;
    m->generation = self->generation;
    m->exports = 0;
    m->runs = NULL;
    m->nruns = 0;
    m->runs_only = 0;
    return m;
}

/* m's pages listed in m->m.pages (from its runs, for a kv_match that kept
 * them as runs). 0, or -1 with MemoryError. */
static int match_pages(MatchObject *m)
{
    if (!m->runs_only) return 0;
    int32_t np = 0;
    for (int32_t i = 0; i < m->nruns; i++) np += m->runs[i].count;
    if (cache_seq_reserve(&m->m, np) != RKV_OK) {
        PyErr_NoMemory();
        return -1;
    }
    m->m.num_pages = radix_page_runs_expand(m->runs, m->nruns, m->m.pages);
    m->runs_only = 0;
    return 0;
}

/* match_vals_set() by the set flags, page by page. */
static int match_vals_read(const CacheObject *self, const MatchObject *m)
{
    if (!m->runs_only) return vals_all_set(self, m->m.pages, m->m.num_pages);
    for (int32_t i = 0; i < m->nruns; i++) {
        const radix_page_run *r = &m->runs[i];
        if ((int64_t)r->first + r->count > self->vals_pages
            || memchr(self->vals_set + r->first, 0, (size_t)r->count))
            return 0;
    }
    return 1;
}

/* 1 when every page of m (listed or as runs) holds values kv_insert stored:
 * always while vals_partial is 0 (the sanitizer build checks that it is so). */
static int match_vals_set(const CacheObject *self, const MatchObject *m)
{
#ifdef __SANITIZE_ADDRESS__
    if (!self->vals_partial && !match_vals_read(self, m)) {
        fprintf(stderr, "radixkv: _radixkv.c match_vals_set: a page without values while "
                "vals_partial is 0\n");
        abort();
    }
#endif
    return !self->vals_partial || match_vals_read(self, m);
}

/* Pages pg .. pg + np - 1 (one run of ids, room reserved) take values[from *
 * P ..] and tags[from ..] (tg NULL: 0): one copy where the values are
 * contiguous int64, their run bits, their set flags. */
static void vals_put_run(CacheObject *self, int32_t pg, int32_t np, int32_t from,
                         const vals_view *v, const vals_view *tg)
{
    const int32_t P = self->page_size;
    int64_t *dst = self->vals + (int64_t)pg * P;
    const int64_t *src = dst;
    if (v->view.itemsize == 8 && v->kind == 's' && v->stride == 8) {
        src = (const int64_t *)v->view.buf + (Py_ssize_t)from * P;
        memcpy(dst, src, sizeof(int64_t) * (size_t)np * (size_t)P);
    } else {
        for (Py_ssize_t q = 0; q < (Py_ssize_t)np * P; q++)
            dst[q] = vals_view_get(v, (Py_ssize_t)from * P + q);
    }
    vals_runs_mark(self, pg, (int64_t)pg + np, src);
    if (self->vals_tag)
        for (int32_t q = 0; q < np; q++)
            self->vals_tag[pg + q] = tg ? vals_view_get(tg, from + q) : 0;
    /* Values, and no digest: an earlier owner's is not this page's. */
    memset(self->vals_set + pg, VALS_HAVE, (size_t)np);
}

/* Pages pages[from..to) that the cache holds (CACHED) take values[j * P ..
 * (j + 1) * P) and tags[j] (tg NULL: 0) for page j. -1 with MemoryError. */
static int vals_store(CacheObject *self, const int32_t *pages, int32_t from, int32_t to,
                      const vals_view *v, const vals_view *tg)
{
    int32_t top = 0;
    for (int32_t j = from; j < to; j++)
        if (pages[j] >= top) top = pages[j] + 1;
    if (vals_reserve(self, top) < 0 || (tg && tags_reserve(self) < 0)) return -1;
    const page_pool *pool = &self->pool;
    /* Runs of consecutive page ids (the pool hands out runs) in one copy each. */
    for (int32_t j = from, e; j < to; j = e) {
        int32_t pg = pages[j];
        e = j + 1;
        if (page_pool_state(pool, pg) != PAGE_CACHED) continue;
        while (e < to && pages[e] == pg + (e - j) && page_pool_state(pool, pages[e]) == PAGE_CACHED) e++;
        vals_put_run(self, pg, e - j, j, v, tg);
    }
    return 0;
}

/* The arguments of a METH_FASTCALL | METH_KEYWORDS method, positional or by
 * name, into out[i] for names[i] (NULL where not given; the first nreq are
 * required). The kv_* calls the adapter makes on every request take this
 * route: no argument tuple is built and no format string parsed. 0, or -1
 * with TypeError. */
static int fast_args(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, const char *const *names, int nreq, PyObject **out)
{
    int n = 0;
    while (names[n]) out[n++] = NULL;
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)", fname, n,
                     nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) out[i] = args[i];
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int i = 0;
        while (i < n && PyUnicode_CompareWithASCIIString(key, names[i]) != 0) i++;
        if (i == n) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname,
                         key);
            return -1;
        }
        if (out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname,
                         names[i]);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (int i = 0; i < nreq; i++)
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)", fname,
                         names[i], i + 1);
            return -1;
        }
    return 0;
}

/* tok as a contiguous, aligned 1-D int64 buffer (array('q'), numpy's
 * int64, SGLang's token arrays) of a radix cache, for the kv_* routes that
 * hand the caller's ids to the tree as they are: 1 with *v held, or 0 (nothing
 * held, no exception) when tok or the cache needs the general route, which
 * names any problem with tok. */
static int key64_open(CacheObject *self, PyObject *tok, Py_buffer *v)
{
    if (!self->c || !cache_radix_tree(self->c) || !PyObject_CheckBuffer(tok)
        || PyBytes_Check(tok) || PyByteArray_Check(tok))
        return 0;
    if (PyObject_GetBuffer(tok, v, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (v->ndim != 1 || v->itemsize != 8 || format_kind(v->format, v->itemsize) != 's'
        || (v->strides && v->strides[0] != 8) || ((uintptr_t)v->buf % 8) != 0
        || v->len / 8 > INT32_MAX) {
        PyBuffer_Release(v);
        return 0;
    }
    return 1;
}

/* m keeps runs[0..nruns) (the cache's scratch, copied) as its pages. 0, or
 * -1 with MemoryError. */
static int match_keep_runs(MatchObject *m, const radix_page_run *runs, int32_t nruns)
{
    m->runs = m->run_buf;
    if (nruns > (int32_t)(sizeof m->run_buf / sizeof m->run_buf[0])
        && !(m->runs = malloc(sizeof *runs * (size_t)nruns))) {
        m->runs = m->run_buf;
        PyErr_NoMemory();
        return -1;
    }
    if (nruns) memcpy(m->runs, runs, sizeof *runs * (size_t)nruns);
    m->nruns = nruns;
    m->runs_only = 1;
    return 0;
}

/* vals_store() for a path given as runs, all of whose pages the cache holds:
 * path pages skip, skip + 1, .. (page j of the path takes values[j * P ..
 * (j + 1) * P) and tags[j]). A run of ids is one copy, as the values of page
 * id g sit at g * P. -1 with MemoryError. */
static int vals_store_runs(CacheObject *self, const radix_page_run *runs, int32_t nruns,
                           int32_t skip, const vals_view *v, const vals_view *tg)
{
    int32_t top = 0;
    for (int32_t i = 0; i < nruns; i++)
        if (runs[i].first + runs[i].count > top) top = runs[i].first + runs[i].count;
    if (vals_reserve(self, top) < 0 || (tg && tags_reserve(self) < 0)) return -1;
    for (int32_t i = 0, j = 0; i < nruns; j += runs[i].count, i++) {
        int32_t a = j < skip ? skip - j : 0; /* the run's first page to store */
        if (a >= runs[i].count) continue;
        vals_put_run(self, runs[i].first + a, runs[i].count - a, j + a, v, tg);
    }
    return 0;
}

/* kv_insert's values (one per page-aligned token) and tags (one per page,
 * ntags < 0: none given) are long enough; -1 with ValueError if not. */
static int insert_sizes_check(Py_ssize_t nvals, Py_ssize_t ntags, int32_t n, int32_t npg)
{
    if (nvals < n) {
        PyErr_Format(PyExc_ValueError, "radixkv.Cache.kv_insert: values has %zd items, the %d "
                     "page-aligned tokens need as many", nvals, n);
        return -1;
    }
    if (ntags >= 0 && ntags < npg) {
        PyErr_Format(PyExc_ValueError, "radixkv.Cache.kv_insert: tags has %zd items, the %d "
                     "pages need one each", ntags, npg);
        return -1;
    }
    return 0;
}

/* kv_insert's values and tags (tago None: none), opened for one call. */
typedef struct kv_vals {
    vals_view v, tg;
    int have_tags;
} kv_vals;

static void kv_vals_close(kv_vals *kv)
{
    PyBuffer_Release(&kv->v.view);
    if (kv->have_tags) PyBuffer_Release(&kv->tg.view);
}

/* kv->v and kv->tg opened from valo and tago and checked against the n
 * page-aligned tokens of npg pages (insert_sizes_check), for both of
 * kv_insert's routes. 0, or -1 with the exception set and nothing held. */
static int kv_vals_open(PyObject *valo, PyObject *tago, int32_t n, int32_t npg, kv_vals *kv)
{
    kv->have_tags = 0;
    if (vals_view_open(valo, "radixkv.Cache.kv_insert: values", &kv->v) < 0) return -1;
    if (tago != Py_None) {
        if (vals_view_open(tago, "radixkv.Cache.kv_insert: tags", &kv->tg) < 0) {
            PyBuffer_Release(&kv->v.view);
            return -1;
        }
        kv->have_tags = 1;
    }
    if (insert_sizes_check(kv->v.n, kv->have_tags ? kv->tg.n : -1, n, npg) < 0) {
        kv_vals_close(kv);
        return -1;
    }
    return 0;
}

/* The exception for a kv_insert the cache refused with st; asked: the pages
 * it wanted from the pool (said when the pool had too few). NULL. */
static PyObject *kv_insert_refused(CacheObject *self, rkv_status st, int32_t asked)
{
    char msg[128] = "";
    if (st == RKV_ENOSPC)
        snprintf(msg, sizeof msg, "%d pages asked, %d free (evict first)", asked,
                 page_pool_num_free(&self->pool));
    return raise_status(st, "radixkv.Cache.kv_insert", msg);
}

/* Before an insert that may adopt pages: vals_partial set until the caller
 * has stored their values and puts back what this returns (nothing in
 * between may call back into Python, which could insert without values). */
static int vals_adopting(CacheObject *self)
{
    const int was = self->vals_partial;
    self->vals_partial = 1;
    return was;
}

/* kv_insert for kinds without a one-walk insert (cache_insert_hold with no
 * pages: RKV_ENOTSUP): the cached prefix is matched into path first, so that
 * only the missing pages are allocated, then inserted with them; path ends
 * holding the inserted path. The (prefix_len, Match) answer, or NULL with
 * the exception set. */
static PyObject *kv_insert_matched(CacheObject *self, MatchObject *path, const int32_t *tokens,
                                   int32_t npg, const kv_vals *kv)
{
    const int32_t P = self->page_size, n = npg * P;
    int32_t *pages = NULL, prefix = 0, k = 0, fresh = 0;
    PyObject *r = NULL;
    rkv_status st;
    if (!(pages = malloc(sizeof(int32_t) * (size_t)(npg ? npg : 1)))) {
        PyErr_NoMemory();
        goto out;
    }
    st = cache_match_prefix(self->c, &path->m, tokens, n);
    if (st != RKV_OK) {
        raise_status(st, "radixkv.Cache.kv_insert", "the match of the held prefix");
        goto out;
    }
    k = path->m.num_pages; /* pages[0..k): the cache's */
    if (k == npg) { /* all held (or nothing to insert): the match is the path */
        r = Py_BuildValue("(iO)", k * P, (PyObject *)path);
        goto out;
    }
    if (k) memcpy(pages, path->m.pages, sizeof(int32_t) * (size_t)k);
    fresh = npg - k;
    st = page_pool_alloc(&self->pool, fresh, pages + k);
    if (st != RKV_OK) {
        kv_insert_refused(self, st, fresh);
        goto out;
    }
    const int was_partial = vals_adopting(self); /* kept on any failure */
    st = cache_insert_hold(self->c, &path->m, tokens, n, pages, &prefix);
    if (st != RKV_OK) {
        raise_status(st, "radixkv.Cache.kv_insert", NULL);
        goto give_back;
    }
    /* The pages whose tokens were cached already go back to the pool; the
     * ones the cache adopted take their values. */
    const page_pool *pool = &self->pool;
    rkv_status fs = RKV_OK;
    for (int32_t j = k; j < npg; j++)
        if (page_pool_state(pool, pages[j]) == PAGE_INFLIGHT
            && page_pool_free(&self->pool, &pages[j], 1) != RKV_OK)
            fs = RKV_EINVAL;
    if (fs != RKV_OK) {
        raise_status(fs, "radixkv.Cache.kv_insert", "returning the pages the cache held already");
        goto out;
    }
    int32_t from = k > prefix / P ? k : prefix / P;
    if (vals_store(self, pages, from, npg, &kv->v, kv->have_tags ? &kv->tg : NULL) < 0) goto out;
    self->vals_partial = was_partial;
    r = Py_BuildValue("(iO)", prefix, (PyObject *)path);
    goto out;
give_back:
    page_pool_free(&self->pool, pages + k, fresh);
out:
    free(pages);
    return r;
}

/* kv_insert's answer (prefix_len, path): built directly, not through
 * Py_BuildValue's format (a few tens of ns on a call of ~0.1 us when the key
 * is cached whole). NULL with the exception set. */
static PyObject *insert_answer(int32_t prefix, MatchObject *path)
{
    PyObject *n = PyLong_FromLong(prefix);
    if (!n) return NULL;
    PyObject *r = PyTuple_New(2);
    if (!r) {
        Py_DECREF(n);
        return NULL;
    }
    Py_INCREF(path);
    PyTuple_SET_ITEM(r, 0, n);
    PyTuple_SET_ITEM(r, 1, (PyObject *)path);
    return r;
}

/* kv_insert over a contiguous int64 buffer of ids on a radix cache (see
 * key64_open): the tree walks the caller's ids in place, narrows only the new
 * leaf's, and the Match keeps the path's page runs (cache_radix_insert_hold64);
 * the new pages' values are stored a run at a time. Same answers and errors
 * as the general route, except that an id out of range is found only past
 * the cached part, after the walk (as a match, it has entered that part).
 * Py_NotImplemented (a new reference) when the general route must serve. */
static PyObject *kv_insert64(CacheObject *self, PyObject *tok, PyObject *valo, PyObject *nso,
                             PyObject *tago)
{
    Py_buffer kb;
    if (!key64_open(self, tok, &kb)) Py_RETURN_NOTIMPLEMENTED;
    uint64_t ns;
    kv_vals kv;
    const int32_t P = self->page_size;
    int32_t npg = (int32_t)(kb.len / 8 / P), n = npg * P;
    if (namespace_from(nso, &ns) < 0 || kv_vals_open(valo, tago, n, npg, &kv) < 0) {
        PyBuffer_Release(&kb);
        return NULL;
    }
    PyObject *r = NULL;
    MatchObject *path = match_new(self);
    if (!path) goto out;
    path->m.ns = ns;
    int32_t prefix = 0, nruns = 0, bad = -1;
    const radix_page_run *runs = NULL;
    const int was_partial = vals_adopting(self);
    rkv_status st = cache_radix_insert_hold64(self->c, &path->m, kb.buf, n, &prefix, &runs,
                                              &nruns, &bad);
    if (st != RKV_OK) {
        self->vals_partial = was_partial; /* a failed insert adopted nothing */
        if (bad >= 0)
            PyErr_Format(PyExc_ValueError, "radixkv.Cache.kv_insert: tokens[%d]: %lld is out of "
                         "range [0, %d]", bad, (long long)((const int64_t *)kb.buf)[bad],
                         INT32_MAX);
        else
            kv_insert_refused(self, st, npg - prefix / P);
        goto out;
    }
    if (match_keep_runs(path, runs, nruns) < 0
        || vals_store_runs(self, path->runs, path->nruns, prefix / P, &kv.v,
                           kv.have_tags ? &kv.tg : NULL) < 0)
        goto out;
    self->vals_partial = was_partial;
    r = insert_answer(prefix, path);
out:
    Py_XDECREF(path);
    kv_vals_close(&kv);
    PyBuffer_Release(&kb);
    return r;
}

/* Cache_kv_insert past its argument parsing (nso NULL or None: namespace 0,
 * tago None: no tags), shared with kv_insert_params. */
static PyObject *kv_insert_args(CacheObject *self, PyObject *tok, PyObject *valo,
                                PyObject *nso, PyObject *tago)
{
    PyObject *fast = kv_insert64(self, tok, valo, nso, tago);
    if (fast != Py_NotImplemented) return fast;
    Py_DECREF(fast);
    uint64_t ns;
    ids t;
    if (key_from(self, tok, nso, "radixkv.Cache.kv_insert: tokens", &ns, &t) < 0) return NULL;
    const int32_t P = self->page_size;
    int32_t npg = (int32_t)(t.n / P), n = npg * P;
    kv_vals kv;
    if (kv_vals_open(valo, tago, n, npg, &kv) < 0) {
        ids_release(&t);
        return NULL;
    }
    PyObject *r = NULL;
    MatchObject *path = match_new(self);
    if (!path) goto out;
    path->m.ns = ns;
    int32_t prefix = 0;
    const int was_partial = vals_adopting(self); /* kept on any failure */
    rkv_status st = cache_insert_hold(self->c, &path->m, t.data, n, NULL, &prefix);
    if (st == RKV_OK) {
        if (vals_store(self, path->m.pages, prefix / P, npg, &kv.v,
                       kv.have_tags ? &kv.tg : NULL) < 0)
            goto out;
        self->vals_partial = was_partial;
        r = Py_BuildValue("(iO)", prefix, (PyObject *)path);
        goto out;
    }
    if (st != RKV_ENOTSUP) {
        kv_insert_refused(self, st, npg - prefix / P);
        goto out;
    }
    self->vals_partial = was_partial; /* not supported: nothing adopted */
    r = kv_insert_matched(self, path, t.data, npg, &kv);
out:
    Py_XDECREF(path);
    kv_vals_close(&kv);
    ids_release(&t);
    return r;
}

/* kv_insert(tokens, values, namespace=None) -> (prefix_len, Match): insert the
 * page-aligned head of tokens; the pages the cache did not hold yet take
 * values[i] for token i (at least as many values as aligned tokens). The
 * Match is the inserted path's (its lock handle), unlocked.
 *
 * One walk of the tree where the kind can (radix): cache_insert_hold() with
 * no pages takes the missing ones from the pool once its walk has found
 * them, and leaves the Match on the path. Other kinds: the cached prefix is
 * matched first so that only the missing pages are allocated (as a caller of
 * match / alloc / insert would), then the same insert with them. */
static PyObject *Cache_kv_insert(CacheObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const names[] = {"tokens", "values", "namespace", "tags", NULL};
    PyObject *a[4];
    if (fast_args("kv_insert", args, nargs, kwnames, names, 2, a) < 0) return NULL;
    return kv_insert_args(self, a[0], a[1], a[2], a[3] ? a[3] : Py_None);
}

/* kv_match over a contiguous int64 buffer (array('q'), numpy's int64,
 * SGLang's token arrays) on a radix cache: the tree walks the caller's ids
 * in place (cache_radix_match64) and the Match keeps the page runs. An id
 * outside [0, 2**31) is then a mismatch, not an error (the walk does not
 * read past where the match stops, so it cannot check the rest). The
 * Match, NULL with the exception set, or Py_NotImplemented (a new
 * reference) when tok or the kind needs kv_match's general route. */
static PyObject *kv_match64(CacheObject *self, PyObject *tok, PyObject *nso, int64_t limit)
{
    Py_buffer v;
    if (!key64_open(self, tok, &v)) Py_RETURN_NOTIMPLEMENTED;
    uint64_t ns;
    MatchObject *m = NULL;
    if (namespace_from(nso, &ns) < 0 || !(m = match_new(self))) {
        PyBuffer_Release(&v);
        return NULL;
    }
    m->m.ns = ns;
    const int32_t P = self->page_size;
    const int32_t n = (int32_t)(limit >= 0 && limit < v.len / 8 ? limit : v.len / 8);
    const radix_page_run *runs = NULL;
    int32_t nruns = 0;
    rkv_status st = cache_radix_match64(self->c, &m->m, v.buf, n / P * P, &runs, &nruns);
    PyBuffer_Release(&v);
    if (st != RKV_OK) {
        Py_DECREF(m);
        return raise_status(st, "radixkv.Cache.kv_match", NULL);
    }
    if (match_keep_runs(m, runs, nruns) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return (PyObject *)m;
}

/* ---- SGLang's params objects, read and built in C --------------------------
 *
 * radixkv.sglang's per-request calls (match_prefix, path_device_indices,
 * insert, evict, lock, unlock) are each one C call around the tree's own
 * work plus a few SGLang objects read and built: the params, the key's
 * fields, the Node, MatchResult, InsertResult, EvictResult, TreeLock and
 * DecLockRefParams. The adapter binds them on its instance (its _bind) to
 * the kv_*_params, kv_lock, kv_unlock and kv_path_values calls below, with
 * specs it prepares once (which classes, which defaults); whatever is not
 * the plain call goes back to its Python general route. */

static PyObject *str_key, *str_value, *str_token_ids, *str_limit, *str_extra_key,
                *str_cache_salt, *str_is_bigram, *str_prefix_len, *str_last_device_node,
                *str_node, *str_receipt, *str_match, *str_num_tokens, *str_num_tokens_evicted,
                *str_allocator, *str_free_segment, *kw_start_pos, *empty_tuple;

/* The fields of SGLang's RadixKey the params calls read, in key_fields'
 * order (module init). */
enum { KEY_TOKENS, KEY_LIMIT, KEY_EXTRA, KEY_SALT, KEY_BIGRAM, KEY_FIELDS };
static PyObject *key_fields[KEY_FIELDS];

/* The names the params routes read and write, made once (module init). 0, or
 * -1 with the exception set. */
static int params_names_init(void)
{
    struct { PyObject **slot; const char *name; } names[] = {
        {&str_key, "key"}, {&str_value, "value"}, {&str_token_ids, "token_ids"},
        {&str_limit, "limit"}, {&str_extra_key, "extra_key"}, {&str_cache_salt, "cache_salt"},
        {&str_is_bigram, "is_bigram"}, {&str_prefix_len, "prefix_len"},
        {&str_last_device_node, "last_device_node"},
        {&str_node, "node"}, {&str_receipt, "receipt"}, {&str_match, "match"},
        {&str_num_tokens, "num_tokens"}, {&str_num_tokens_evicted, "num_tokens_evicted"},
        {&str_allocator, "token_to_kv_pool_allocator"}, {&str_free_segment, "free_segment"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*names[i].slot = PyUnicode_InternFromString(names[i].name))) return -1;
    key_fields[KEY_TOKENS] = str_token_ids;
    key_fields[KEY_LIMIT] = str_limit;
    key_fields[KEY_EXTRA] = str_extra_key;
    key_fields[KEY_SALT] = str_cache_salt;
    key_fields[KEY_BIGRAM] = str_is_bigram;
    PyObject *start_pos = PyUnicode_InternFromString("start_pos");
    if (!start_pos || !(kw_start_pos = PyTuple_Pack(1, start_pos))) {
        Py_XDECREF(start_pos);
        return -1;
    }
    Py_DECREF(start_pos);
    return (empty_tuple = PyTuple_New(0)) ? 0 : -1;
}

/* 1 when str a equals b: two interned names (attribute names, the usual
 * case) are equal only when they are one object. */
static int name_is(PyObject *a, PyObject *b)
{
    if (a == b) return 1;
    if (PyUnicode_CHECK_INTERNED(a) && PyUnicode_CHECK_INTERNED(b)) return 0;
    return PyUnicode_Compare(a, b) == 0;
}

/* Attribute reads of a __slots__ class (SGLang's RadixKey, the adapter's
 * Node) at the slots' offsets, as CPython's own specialized attribute loads
 * do: PyObject_GetAttr's type lookup and descriptor call per read made the
 * params calls' reads slower than the Python they replace (match_prefix in
 * C was no faster than in Python). The offsets are read once per class
 * and trusted while the class's version tag is unchanged (any change to the
 * class or its bases gives it a new one); any other object is read with
 * PyObject_GetAttr. */
enum { SLOTS_MAX = 6 };
typedef struct {
    PyTypeObject *type; /* a strong reference, or NULL */
    unsigned int tag;   /* type's version tag when the offsets were read */
    int slots;          /* 1: every name is an object slot of type */
    Py_ssize_t off[SLOTS_MAX];
} slot_map;

/* 1 when o's names[0..n) are read at m's offsets (read them now if o's class
 * is new to m or changed since), 0 when they are read with GetAttr. */
static int slot_map_fits(slot_map *m, PyObject *o, PyObject *const *names, int n)
{
    PyTypeObject *tp = Py_TYPE(o);
    if (tp == m->type && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)
        && tp->tp_version_tag == m->tag)
        return m->slots;
    /* The class's attribute through the public lookup: a type's getattr
     * (type's own, not a metaclass's special one) finds the name along the
     * class's MRO, which assigns the version tag as it goes, and hands a slot's
     * member descriptor back as itself. The descriptor must belong to tp or a
     * base, so that its offset lies inside every instance of tp; anything
     * else, or no such attribute, is read with GetAttr. */
    int slots = tp->tp_getattro == PyObject_GenericGetAttr
                && Py_TYPE(tp)->tp_getattro == PyType_Type.tp_getattro;
    for (int i = 0; i < n && slots; i++) {
        PyObject *d = PyObject_GetAttr((PyObject *)tp, names[i]); /* new reference */
        if (!d) {
            PyErr_Clear(); /* the GetAttr reads raise it again, where it is the caller's */
            slots = 0;
            break;
        }
        slots = Py_IS_TYPE(d, &PyMemberDescr_Type)
                && PyType_IsSubtype(tp, ((PyDescrObject *)d)->d_type)
                && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (slots) m->off[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    if (!(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) return 0;
    Py_INCREF(tp);
    Py_XSETREF(m->type, tp);
    m->tag = tp->tp_version_tag;
    m->slots = slots;
    return slots;
}

/* out[i] = o.names[i] for i < n (new references): at m's offsets where they
 * fit, else with PyObject_GetAttr (an unset slot too, which raises
 * AttributeError there). 0, or -1 with the exception set and nothing held. */
static int attrs_read(slot_map *m, PyObject *o, PyObject *const *names, int n, PyObject **out)
{
    if (slot_map_fits(m, o, names, n)) {
        int i = 0;
        for (; i < n && (out[i] = *(PyObject **)((char *)o + m->off[i])); i++) Py_INCREF(out[i]);
        if (i == n) return 0;
        while (i--) Py_DECREF(out[i]);
    }
    for (int i = 0; i < n; i++)
        if (!(out[i] = PyObject_GetAttr(o, names[i]))) {
            while (i--) Py_DECREF(out[i]);
            return -1;
        }
    return 0;
}

static slot_map key_slots, node_slots; /* RadixKey's, Node's */

/* A holder of a Match (kv_match's into, kv_insert_params' spec): a callable,
 * called with the Match, or a 1-tuple (cls,): an instance of cls made as
 * object.__new__(cls) with its `match` attribute set to the Match, without
 * calling cls (the adapter's Node, whose __init__ does only that; a Python
 * __init__ was a third of what building a match's result cost). */
static int holder_ok(PyObject *h)
{
    if (!PyTuple_CheckExact(h)) return PyCallable_Check(h);
    return PyTuple_GET_SIZE(h) == 1 && PyType_Check(PyTuple_GET_ITEM(h, 0))
           && ((PyTypeObject *)PyTuple_GET_ITEM(h, 0))->tp_new == PyBaseObject_Type.tp_new;
}

/* holder's object for m (holder_ok's forms). New reference, or NULL with the
 * exception set. */
static PyObject *holder_new(PyObject *h, MatchObject *m)
{
    if (!PyTuple_CheckExact(h)) return PyObject_CallOneArg(h, (PyObject *)m);
    PyObject *r = PyBaseObject_Type.tp_new((PyTypeObject *)PyTuple_GET_ITEM(h, 0), empty_tuple,
                                           NULL);
    if (!r) return NULL;
    if (slot_map_fits(&node_slots, r, &str_match, 1)) {
        PyObject **slot = (PyObject **)((char *)r + node_slots.off[0]);
        Py_XSETREF(*slot, Py_NewRef((PyObject *)m));
    } else if (PyObject_SetAttr(r, str_match, (PyObject *)m) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    return r;
}

/* kv_match's into: (result type, holder type, repeat, tail, empty), checked;
 * 0, or -1 with TypeError. */
static int into_check(PyObject *into)
{
    if (!PyTuple_CheckExact(into) || PyTuple_GET_SIZE(into) != 5
        || !PyType_Check(PyTuple_GET_ITEM(into, 0))
        || !PyType_IsSubtype((PyTypeObject *)PyTuple_GET_ITEM(into, 0), &PyTuple_Type)
        || !holder_ok(PyTuple_GET_ITEM(into, 1))
        || !PyLong_CheckExact(PyTuple_GET_ITEM(into, 2))
        || !PyTuple_CheckExact(PyTuple_GET_ITEM(into, 3))) {
        PyErr_SetString(PyExc_TypeError, "radixkv.Cache.kv_match: into must be (a tuple "
                        "subclass, a callable or (a class,), an int, a tuple, the empty "
                        "result)");
        return -1;
    }
    long k = PyLong_AsLong(PyTuple_GET_ITEM(into, 2));
    if (k < 0 || k > 16) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "radixkv.Cache.kv_match: into's repeat %ld is out "
                         "of range [0, 16]", k);
        return -1;
    }
    return 0;
}

/* The Match m (taken; NULL passes its exception on) as the checked into asks
 * (kv_match's docstring): into's empty result for an empty match, else
 * cls((length,) + (holder(m),) * repeat + tail), built as tuple.__new__(cls,
 * ...) builds it (a NamedTuple's generated __new__ is a Python frame;
 * SGLang's MatchResult is one). The adapter's match_prefix built this tuple
 * in Python: 362 -> 291 ns a call on a short cached key with it built here.
 * NULL with the exception set. */
static PyObject *match_wrap(MatchObject *m, PyObject *into)
{
    if (!m) return NULL;
    if (m->m.len == 0) {
        Py_DECREF(m);
        PyObject *empty = PyTuple_GET_ITEM(into, 4);
        Py_INCREF(empty);
        return empty;
    }
    PyObject *tail = PyTuple_GET_ITEM(into, 3);
    PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(into, 0);
    Py_ssize_t k = (Py_ssize_t)PyLong_AsLong(PyTuple_GET_ITEM(into, 2));
    Py_ssize_t nt = PyTuple_GET_SIZE(tail);
    PyObject *holder = holder_new(PyTuple_GET_ITEM(into, 1), m);
    PyObject *len = PyLong_FromLong(m->m.len);
    Py_DECREF(m);
    /* The instance allocated and filled as tuple.__new__(cls, items) leaves
     * it (its tp_alloc, then the items), without the two tuples that call
     * builds on the way (its argument and a plain tuple of the items). */
    PyObject *r = holder && len ? cls->tp_alloc(cls, 1 + k + nt) : NULL;
    if (!r) {
        Py_XDECREF(holder);
        Py_XDECREF(len);
        return NULL;
    }
    PyTuple_SET_ITEM(r, 0, len);
    for (Py_ssize_t i = 0; i < k; i++) {
        Py_INCREF(holder);
        PyTuple_SET_ITEM(r, 1 + i, holder);
    }
    Py_DECREF(holder);
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *x = PyTuple_GET_ITEM(tail, i);
        Py_INCREF(x);
        PyTuple_SET_ITEM(r, 1 + k + i, x);
    }
    return r;
}

/* kv_match(tokens, namespace=None, into=None, limit=None) -> Match: match
 * of the page-aligned head (tokens past the last whole page are ignored, as
 * SGLang's page_aligned) of the first `limit` tokens (all with None: what
 * SGLang's RadixKey.limit caps, read in place where raw_token_ids() copies
 * the head: its scheduler passes every request's whole token array with a
 * limit); with into, the match wrapped (match_wrap). */
static PyObject *Cache_kv_match(CacheObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    static const char *const names[] = {"tokens", "namespace", "into", "limit", NULL};
    PyObject *a[4];
    if (fast_args("kv_match", args, nargs, kwnames, names, 1, a) < 0) return NULL;
    PyObject *tok = a[0], *nso = a[1], *into = a[2] == Py_None ? NULL : a[2];
    if (into && into_check(into) < 0) return NULL;
    int64_t limit = -1;
    if (a[3] && a[3] != Py_None) {
        long long l = PyLong_AsLongLong(a[3]);
        if (l == -1 && PyErr_Occurred()) return NULL;
        if (l < 0) {
            PyErr_Format(PyExc_ValueError, "radixkv.Cache.kv_match: limit %lld (need >= 0 or "
                         "None)", l);
            return NULL;
        }
        limit = l;
    }
    uint64_t ns;
    ids t;
    PyObject *fast = kv_match64(self, tok, nso, limit);
    if (fast != Py_NotImplemented) return into ? match_wrap((MatchObject *)fast, into) : fast;
    Py_DECREF(fast);
    if (key_from(self, tok, nso, "radixkv.Cache.kv_match: tokens", &ns, &t) < 0) return NULL;
    MatchObject *m = match_new(self);
    if (!m) {
        ids_release(&t);
        return NULL;
    }
    m->m.ns = ns;
    int64_t tn = limit >= 0 && limit < (int64_t)t.n ? limit : (int64_t)t.n;
    rkv_status st = cache_match_prefix(self->c, &m->m, t.data, (int32_t)(tn / self->page_size)
                                       * self->page_size);
    ids_release(&t);
    if (st != RKV_OK) {
        Py_DECREF(m);
        return raise_status(st, "radixkv.Cache.kv_match", NULL);
    }
    return into ? match_wrap(m, into) : (PyObject *)m;
}

/* A dataclass instance as its generated __init__ leaves it: object.__new__(cls),
 * then each field of template (the instance dict that __init__ leaves with
 * every default, in field order) set as an attribute in that order, as
 * __init__ sets them: the template's value, or a new empty container of its
 * type for a name in fresh (a default_factory's list or dict), or the value
 * of a (name, value) pair of set[0..nset). Attribute by attribute, so that
 * the instance keeps its class's shared-key layout as __init__'s does (a
 * copied dict given as __dict__ was slower to make and to free). The adapter
 * checks once that cls is such a dataclass (radixkv.sglang's _template()).
 * New reference, or NULL with the exception set. */
static PyObject *obj_from_template(PyObject *cls, PyObject *template, PyObject *fresh,
                                   PyObject *const *set, int nset)
{
    PyObject *r = PyBaseObject_Type.tp_new((PyTypeObject *)cls, empty_tuple, NULL);
    if (!r) return NULL;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(template, &pos, &k, &v)) {
        PyObject *x = NULL;
        for (int i = 0; i < nset && !x; i++)
            if (name_is(k, set[2 * i])) x = Py_NewRef(set[2 * i + 1]);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fresh) && !x; i++) {
            if (!name_is(k, PyTuple_GET_ITEM(fresh, i))) continue;
            if (PyList_CheckExact(v)) x = PyList_New(0);
            else if (PyDict_CheckExact(v)) x = PyDict_New();
            else
                PyErr_Format(PyExc_TypeError, "radixkv.Cache: fresh field %R holds a %s (need "
                             "an empty list or dict)", k, Py_TYPE(v)->tp_name);
            if (!x) goto fail;
        }
        if (!x) x = Py_NewRef(v);
        int rc = PyObject_SetAttr(r, k, x);
        Py_DECREF(x);
        if (rc < 0) goto fail;
    }
    return r;
fail:
    Py_DECREF(r);
    return NULL;
}

/* cls(name=value, ...) for the (name, value) pairs of set[0..nset): from
 * template as obj_from_template makes it, or, for a None template (a class
 * that is not a plain dataclass), by calling cls with those keywords. New
 * reference, or NULL with the exception set. */
static PyObject *obj_new(PyObject *cls, PyObject *template, PyObject *fresh,
                         PyObject *const *set, int nset)
{
    if (template != Py_None) return obj_from_template(cls, template, fresh, set, nset);
    enum { OBJ_NEW_MAX = 4 };
    if (nset > OBJ_NEW_MAX)
        return PyErr_Format(PyExc_SystemError, "radixkv.Cache: obj_new of %d fields", nset);
    PyObject *argv[1 + OBJ_NEW_MAX] = {NULL};
    PyObject *kw = nset ? PyTuple_New(nset) : NULL; /* no keywords: NULL, not () */
    if (nset && !kw) return NULL;
    for (int i = 0; i < nset; i++) {
        PyTuple_SET_ITEM(kw, i, Py_NewRef(set[2 * i]));
        argv[1 + i] = set[2 * i + 1];
    }
    PyObject *r = PyObject_Vectorcall(cls, argv + 1, PY_VECTORCALL_ARGUMENTS_OFFSET, kw);
    Py_XDECREF(kw);
    return r;
}

/* A template spec's (cls, template, fresh): a type, a dict or None, a tuple of
 * str. 0, or -1 with TypeError naming what. */
static int template_check(PyObject *cls, PyObject *template, PyObject *fresh, const char *what)
{
    if (!PyType_Check(cls) || (template != Py_None && !PyDict_CheckExact(template))
        || !PyTuple_CheckExact(fresh)) {
        PyErr_Format(PyExc_TypeError, "%s: expected (a class, its instance dict or None, a "
                     "tuple of field names), got (%s, %s, %s)", what, Py_TYPE(cls)->tp_name,
                     Py_TYPE(template)->tp_name, Py_TYPE(fresh)->tp_name);
        return -1;
    }
    /* object.__new__ is called directly below, without the check its Python
     * wrapper makes that the class's instances are plain objects. */
    if (template != Py_None && ((PyTypeObject *)cls)->tp_new != PyBaseObject_Type.tp_new) {
        PyErr_Format(PyExc_TypeError, "%s: %s has a __new__ of its own; give None as its "
                     "template", what, ((PyTypeObject *)cls)->tp_name);
        return -1;
    }
    return 0;
}

/* key's fields (new references in f, KEY_FIELDS of them), and whether the key
 * is a plain one: no extra_key, cache_salt or bigrams. 1 plain, 0 not, -1
 * with the exception set (nothing held). */
static int key_read(PyObject *key, PyObject **f)
{
    if (attrs_read(&key_slots, key, key_fields, KEY_FIELDS, f) < 0) return -1;
    int b = PyObject_IsTrue(f[KEY_BIGRAM]);
    if (b < 0) {
        for (int i = 0; i < KEY_FIELDS; i++) Py_DECREF(f[i]);
        return -1;
    }
    return !b && f[KEY_EXTRA] == Py_None && f[KEY_SALT] == Py_None;
}

static void key_release(PyObject **f)
{
    for (int i = 0; i < KEY_FIELDS; i++) Py_CLEAR(f[i]);
}

/* The object the weak reference ref names, a new reference; NULL with
 * ReferenceError (naming what) when it is gone. PyWeakref_GetRef where
 * CPython has it (3.13 deprecates PyWeakref_GetObject, whose borrowed
 * reference could die during the caller's next call). */
static PyObject *owner_get(PyObject *ref, const char *what)
{
    PyObject *owner = NULL;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyWeakref_GetRef(ref, &owner) < 0) return NULL;
#else
    owner = PyWeakref_GetObject(ref);
    if (!owner) return NULL;
    if (owner == Py_None) owner = NULL;
    else Py_INCREF(owner);
#endif
    if (!owner)
        PyErr_Format(PyExc_ReferenceError, "%s: the object spec's weak reference names is gone",
                     what);
    return owner;
}

/* A params call's general route: None when general is None, else
 * general(owner, a, b) (b NULL: general(owner, a)), owner the object the
 * weak reference ref names (the adapter: no reference cycle through the
 * call bound on it). what names the call in the error of an owner gone. */
static PyObject *owner_call(PyObject *general, PyObject *ref, PyObject *a, PyObject *b,
                            const char *what)
{
    if (general == Py_None) Py_RETURN_NONE;
    PyObject *owner = owner_get(ref, what);
    if (!owner) return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(general, owner, a, b, NULL);
    Py_DECREF(owner);
    return r;
}

/* The params calls' two positional arguments (spec, then second): 0, or -1
 * with TypeError. */
static int spec_nargs(const char *what, const char *second, Py_ssize_t nargs)
{
    if (nargs == 2) return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes 2 arguments (spec, %s), %zd given", what, second,
                 nargs);
    return -1;
}

/* kv_insert_params(spec, params) -> result: SGLang's RadixCache.insert(params)
 * for the scheduler's plain call in one C call, any other through the
 * caller's general route. spec = (to_values, value_type, holder, root,
 * result, template, fresh, general, owner), made once by the adapter
 * (radixkv.sglang's _insert_spec; first, so that functools.partial can bind
 * it and the adapter's insert is this call, without a Python frame).
 *
 * The plain call: params.value an instance of value_type (a torch.Tensor),
 * params.key a RadixKey with limit, extra_key and cache_salt None and
 * is_bigram false, and to_values(value) (torch's to_dlpack) a DLPack capsule
 * of a CPU tensor. Then: kv_insert(key.token_ids, capsule), node =
 * holder(match) if the match is not empty, else root, and the answer
 * result(prefix_len=prefix, last_device_node=node), built from template (the
 * instance dict of result(prefix_len=None), fresh naming its default_factory
 * fields) as obj_from_template does, or by calling result when template is
 * None. Any other call: general(owner, params.key, params.value), owner the
 * object the weak reference owner names, or None (nothing done) when
 * general is None. An attribute missing, or kv_insert's own refusal,
 * raises. */
static PyObject *Cache_kv_insert_params(CacheObject *self, PyObject *const *args,
                                        Py_ssize_t nargs)
{
    const char *what = "radixkv.Cache.kv_insert_params";
    if (spec_nargs(what, "params", nargs) < 0) return NULL;
    PyObject *spec = args[0], *params = args[1];
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 9
        || !PyCallable_Check(PyTuple_GET_ITEM(spec, 0))
        || !PyType_Check(PyTuple_GET_ITEM(spec, 1))
        || !holder_ok(PyTuple_GET_ITEM(spec, 2))
        || (PyTuple_GET_ITEM(spec, 7) != Py_None
            && (!PyCallable_Check(PyTuple_GET_ITEM(spec, 7))
                || !PyWeakref_CheckRef(PyTuple_GET_ITEM(spec, 8))))) {
        PyErr_Format(PyExc_TypeError, "%s: spec must be (to_values, value_type, holder, root, "
                     "result, template, fresh, general or None, a weak reference)", what);
        return NULL;
    }
    PyObject *cls = PyTuple_GET_ITEM(spec, 4), *template = PyTuple_GET_ITEM(spec, 5),
             *fresh = PyTuple_GET_ITEM(spec, 6);
    if (template_check(cls, template, fresh, what) < 0) return NULL;
    PyObject *key = NULL, *value = NULL, *cap = NULL, *got = NULL, *node = NULL, *r = NULL;
    PyObject *f[KEY_FIELDS] = {NULL};
    if (!(value = PyObject_GetAttr(params, str_value))) goto out;
    if (!(key = PyObject_GetAttr(params, str_key))) goto out;
    if (value == Py_None) goto general;
    int is = PyObject_IsInstance(value, PyTuple_GET_ITEM(spec, 1));
    if (is < 0) goto out;
    if (!is) goto general;
    int plain = key_read(key, f);
    if (plain < 0) goto out;
    if (!plain || f[KEY_LIMIT] != Py_None) goto general;
    PyObject *tok = f[KEY_TOKENS];
    if (!(cap = PyObject_CallOneArg(PyTuple_GET_ITEM(spec, 0), value))) goto out;
    /* A tensor elsewhere than the CPU: the general route copies it first. */
    const dl_tensor *t = PyCapsule_IsValid(cap, "dltensor")
                         ? PyCapsule_GetPointer(cap, "dltensor") : NULL;
    if (t && t->device.device_type != DL_CPU) goto general;
    if (!(got = kv_insert_args(self, tok, cap, NULL, Py_None))) goto out;
    PyObject *prefix = PyTuple_GET_ITEM(got, 0);
    MatchObject *path = (MatchObject *)PyTuple_GET_ITEM(got, 1);
    if (path->m.len) node = holder_new(PyTuple_GET_ITEM(spec, 2), path);
    else node = Py_NewRef(PyTuple_GET_ITEM(spec, 3));
    if (!node) goto out;
    PyObject *set[4] = {str_prefix_len, prefix, str_last_device_node, node};
    r = obj_new(cls, template, fresh, set, 2);
    goto out;
general:
    r = owner_call(PyTuple_GET_ITEM(spec, 7), PyTuple_GET_ITEM(spec, 8), key, value, what);
out:
    key_release(f);
    Py_XDECREF(node);
    Py_XDECREF(got);
    Py_XDECREF(cap);
    Py_XDECREF(key);
    Py_XDECREF(value);
    return r;
}

/* kv_lock(spec, node) -> lock: SGLang's BasePrefixCache.lock(node) for this
 * cache, in one C call: node.match locked when it is not None (a Match of this
 * cache), and the answer lock_cls(node, receipt_cls()) built from templates:
 * spec = (lock_cls, lock_template, lock_fresh, receipt_cls, receipt_template,
 * receipt_fresh), each (cls, template, fresh) as obj_from_template takes it
 * (the templates are the instance dicts of lock_cls(None, None) and
 * receipt_cls()), with "node" and "receipt" set; a None template: the class
 * is called instead. spec first, for functools.partial (kv_insert_params). */
static PyObject *Cache_kv_lock(CacheObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *what = "radixkv.Cache.kv_lock";
    if (spec_nargs(what, "node", nargs) < 0) return NULL;
    PyObject *spec = args[0], *node = args[1];
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 6) {
        PyErr_Format(PyExc_TypeError, "%s: spec must be (lock class, template, fresh, receipt "
                     "class, template, fresh)", what);
        return NULL;
    }
    PyObject *const *s = &PyTuple_GET_ITEM(spec, 0);
    if (template_check(s[0], s[1], s[2], what) < 0 || template_check(s[3], s[4], s[5], what) < 0)
        return NULL;
    PyObject *m;
    if (attrs_read(&node_slots, node, &str_match, 1, &m) < 0) return NULL;
    int locked = m != Py_None;
    if (locked) {
        PyObject *ok = Cache_lock(self, m);
        if (!ok) {
            Py_DECREF(m);
            return NULL;
        }
        Py_DECREF(ok);
    }
    PyObject *receipt = obj_new(s[3], s[4], s[5], NULL, 0);
    PyObject *r = NULL;
    if (receipt) {
        if (s[1] != Py_None) {
            PyObject *set[4] = {str_node, node, str_receipt, receipt};
            r = obj_from_template(s[0], s[1], s[2], set, 2);
        } else
            r = PyObject_CallFunctionObjArgs(s[0], node, receipt, NULL);
        Py_DECREF(receipt);
    }
    /* The lock taken stays taken only with its handle handed out. */
    if (!r && locked) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        Py_XDECREF(Cache_unlock(self, m));
        PyErr_Restore(et, ev, tb);
    }
    Py_DECREF(m);
    return r;
}

/* kv_unlock(lock): SGLang's BasePrefixCache.unlock(lock) for this cache:
 * nothing for None, else lock.node.match unlocked when it is not None (the
 * receipt is empty for this cache, as for SGLang's classic RadixCache). */
static PyObject *Cache_kv_unlock(CacheObject *self, PyObject *lock)
{
    if (lock == Py_None) Py_RETURN_NONE;
    PyObject *node = PyObject_GetAttr(lock, str_node);
    if (!node) return NULL;
    PyObject *m;
    int rc = attrs_read(&node_slots, node, &str_match, 1, &m);
    Py_DECREF(node);
    if (rc < 0) return NULL;
    PyObject *r = m == Py_None ? Py_NewRef(Py_None) : Cache_unlock(self, m);
    Py_DECREF(m);
    return r;
}

/* kv_match_params(spec, params) -> result: SGLang's
 * RadixCache.match_prefix(params) in one C call for a key without namespace
 * or bigrams whose limit is None or >= 0: kv_match(key.token_ids,
 * into=into, limit=key.limit); any other through general(owner, params).
 * spec = (into, general, owner as a weak reference), into as kv_match takes
 * it; spec first, for functools.partial (radixkv.sglang's _bind). */
static PyObject *Cache_kv_match_params(CacheObject *self, PyObject *const *args,
                                       Py_ssize_t nargs)
{
    const char *what = "radixkv.Cache.kv_match_params";
    if (spec_nargs(what, "params", nargs) < 0) return NULL;
    PyObject *spec = args[0], *params = args[1];
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 3
        || (PyTuple_GET_ITEM(spec, 1) != Py_None
            && (!PyCallable_Check(PyTuple_GET_ITEM(spec, 1))
                || !PyWeakref_CheckRef(PyTuple_GET_ITEM(spec, 2))))) {
        PyErr_Format(PyExc_TypeError, "%s: spec must be (into, general or None, a weak "
                     "reference)", what);
        return NULL;
    }
    PyObject *key = NULL, *r = NULL;
    PyObject *f[KEY_FIELDS] = {NULL};
    if (!(key = PyObject_GetAttr(params, str_key))) goto out;
    int plain = key_read(key, f);
    if (plain < 0) goto out;
    if (!plain) goto general;
    /* A negative limit counts from the end (Python's slice): the general
     * route slices. */
    PyObject *limit = f[KEY_LIMIT];
    if (limit != Py_None) {
        if (!PyLong_CheckExact(limit)) goto general;
        long long l = PyLong_AsLongLong(limit);
        if (l == -1 && PyErr_Occurred()) goto out;
        if (l < 0) goto general;
    }
    PyObject *argv[4] = {f[KEY_TOKENS], Py_None, PyTuple_GET_ITEM(spec, 0), limit};
    r = Cache_kv_match(self, argv, 4, NULL);
    goto out;
general:
    r = owner_call(PyTuple_GET_ITEM(spec, 1), PyTuple_GET_ITEM(spec, 2), params, NULL, what);
out:
    key_release(f);
    Py_XDECREF(key);
    return r;
}

static PyObject *Cache_kv_values(CacheObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames);

/* kv_path_values(spec, node) -> tensor: SGLang's
 * RadixCache.path_device_indices(node) in one C call: empty when node.match
 * is None, else to_tensor(kv_values(node.match, dlpack=True)) (torch's
 * from_dlpack). spec = (to_tensor, empty). */
static PyObject *Cache_kv_path_values(CacheObject *self, PyObject *const *args,
                                      Py_ssize_t nargs)
{
    const char *what = "radixkv.Cache.kv_path_values";
    if (spec_nargs(what, "node", nargs) < 0) return NULL;
    PyObject *spec = args[0];
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 2
        || !PyCallable_Check(PyTuple_GET_ITEM(spec, 0))) {
        PyErr_Format(PyExc_TypeError, "%s: spec must be (to_tensor, empty)", what);
        return NULL;
    }
    PyObject *m;
    if (attrs_read(&node_slots, args[1], &str_match, 1, &m) < 0) return NULL;
    if (m == Py_None) {
        Py_DECREF(m);
        return Py_NewRef(PyTuple_GET_ITEM(spec, 1));
    }
    PyObject *argv[2] = {m, Py_True};
    PyObject *cap = Cache_kv_values(self, argv, 2, NULL);
    Py_DECREF(m);
    if (!cap) return NULL;
    PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(spec, 0), cap);
    Py_DECREF(cap);
    return r;
}

static PyObject *Cache_kv_evict(CacheObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames);

/* kv_evict_params(spec, params) -> result: SGLang's RadixCache.evict(params)
 * in one C call for params.num_tokens an int > 0: kv_evict(num_tokens,
 * dlpack=True), then, when it freed tokens,
 * owner.token_to_kv_pool_allocator.free_segment(to_tensor(values),
 * start_pos=0), and the answer result(num_tokens_evicted=freed), built from
 * template as kv_insert_params builds its result (a None template: result
 * called). Any other params through general(owner, params). spec =
 * (to_tensor, result, template, fresh, general, owner as a weak reference). */
static PyObject *Cache_kv_evict_params(CacheObject *self, PyObject *const *args,
                                       Py_ssize_t nargs)
{
    const char *what = "radixkv.Cache.kv_evict_params";
    if (spec_nargs(what, "params", nargs) < 0) return NULL;
    PyObject *spec = args[0], *params = args[1];
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 6
        || !PyCallable_Check(PyTuple_GET_ITEM(spec, 0))
        || !PyCallable_Check(PyTuple_GET_ITEM(spec, 4))
        || !PyWeakref_CheckRef(PyTuple_GET_ITEM(spec, 5))) {
        PyErr_Format(PyExc_TypeError, "%s: spec must be (to_tensor, result, template, fresh, "
                     "general, a weak reference)", what);
        return NULL;
    }
    PyObject *cls = PyTuple_GET_ITEM(spec, 1), *template = PyTuple_GET_ITEM(spec, 2),
             *fresh = PyTuple_GET_ITEM(spec, 3);
    if (template_check(cls, template, fresh, what) < 0) return NULL;
    PyObject *n = PyObject_GetAttr(params, str_num_tokens);
    if (!n) return NULL;
    long long v = PyLong_CheckExact(n) ? PyLong_AsLongLong(n) : 0;
    if (v == -1 && PyErr_Occurred()) {
        Py_DECREF(n);
        return NULL;
    }
    if (v <= 0) { /* not an int > 0: the general route answers */
        Py_DECREF(n);
        return owner_call(PyTuple_GET_ITEM(spec, 4), PyTuple_GET_ITEM(spec, 5), params, NULL,
                          what);
    }
    /* The allocator first: an owner gone (or without an allocator) is
     * refused before anything is evicted, since an eviction is not undone. */
    PyObject *owner = owner_get(PyTuple_GET_ITEM(spec, 5), what), *alloc = NULL;
    if (owner) {
        alloc = PyObject_GetAttr(owner, str_allocator);
        Py_DECREF(owner);
    }
    if (!alloc) {
        Py_DECREF(n);
        return NULL;
    }
    PyObject *argv[3] = {n, Py_False, Py_True};
    PyObject *got = Cache_kv_evict(self, argv, 3, NULL);
    Py_DECREF(n);
    if (!got) {
        Py_DECREF(alloc);
        return NULL;
    }
    PyObject *freed = PyTuple_GET_ITEM(got, 0), *r = NULL;
    int any = PyObject_IsTrue(freed);
    if (any < 0) goto out;
    if (any) {
        PyObject *t = PyObject_CallOneArg(PyTuple_GET_ITEM(spec, 0), PyTuple_GET_ITEM(got, 1));
        PyObject *zero = PyLong_FromLong(0);
        PyObject *done = NULL;
        if (t && zero) {
            PyObject *fargs[3] = {alloc, t, zero};
            done = PyObject_VectorcallMethod(str_free_segment, fargs,
                                             2 | PY_VECTORCALL_ARGUMENTS_OFFSET, kw_start_pos);
        }
        Py_XDECREF(zero);
        Py_XDECREF(t);
        if (!done) goto out;
        Py_DECREF(done);
    }
    PyObject *set[2] = {str_num_tokens_evicted, freed};
    r = obj_new(cls, template, fresh, set, 1);
out:
    Py_DECREF(got);
    Py_DECREF(alloc);
    return r;
}

/* A flag argument (None or absent: 0); -1 with the exception set. */
static int flag_arg(PyObject *o)
{
    return o == NULL || o == Py_None ? 0 : PyObject_IsTrue(o);
}

/* kv_values(match, dlpack=False) -> int64 array (a DLPack capsule with
 * dlpack): the values of the match's path, token by token. Only while the
 * match's pages are surely still its own: locked, or nothing evicted since
 * it was made (else the pages may hold others' values). */
static PyObject *Cache_kv_values(CacheObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const names[] = {"match", "dlpack", NULL};
    PyObject *a[2];
    if (fast_args("kv_values", args, nargs, kwnames, names, 1, a) < 0) return NULL;
    int dlpack = flag_arg(a[1]);
    if (dlpack < 0 || cache_closed(self)) return NULL;
    MatchObject *m = match_arg(self, a[0], "radixkv.Cache.kv_values");
    if (!m) return NULL;
    if (!m->m.locks && m->epoch != self->epoch) {
        PyErr_SetString(PyExc_ValueError, "radixkv.Cache.kv_values: the cache evicted since this "
                        "match was made and it is not locked, so its pages may hold other "
                        "values; match again");
        return NULL;
    }
    if (!match_vals_set(self, m)) {
        PyErr_SetString(PyExc_ValueError, "radixkv.Cache.kv_values: a page of the match has no "
                        "values (inserted with insert, not kv_insert)");
        return NULL;
    }
    const int32_t P = self->page_size;
    int64_t *dst;
    PyObject *o = out_int64_new((Py_ssize_t)m->m.len, dlpack, &dst);
    if (!o) return NULL;
    /* A page's values sit at its id * P, so a run of ids is one copy. */
    if (m->runs_only)
        for (int32_t i = 0, at = 0; i < m->nruns; at += m->runs[i].count, i++)
            vals_gather_run(self, dst + (Py_ssize_t)at * P, m->runs[i].first, m->runs[i].count);
    else
        for (int32_t j = 0, e; j < m->m.num_pages; j = e) {
            const int32_t *pg = m->m.pages;
            for (e = j + 1; e < m->m.num_pages && pg[e] == pg[j] + (e - j); e++) {}
            vals_gather_run(self, dst + (Py_ssize_t)j * P, pg[j], e - j);
        }
    return out_int64_done(o, dlpack);
}

/* The match for kv_tags / kv_set_tags: this cache's, its pages surely its
 * own (locked or nothing evicted since), every page stored by kv_insert. */
static MatchObject *kv_match_arg(CacheObject *self, PyObject *arg, const char *what)
{
    MatchObject *m = match_arg(self, arg, what);
    if (!m) return NULL;
    if (!m->m.locks && m->epoch != self->epoch) {
        PyErr_Format(PyExc_ValueError, "%s: the cache evicted since this match was made and it "
                     "is not locked; match again", what);
        return NULL;
    }
    if (match_pages(m) < 0) return NULL;
    if (!vals_all_set(self, m->m.pages, m->m.num_pages)) {
        PyErr_Format(PyExc_ValueError, "%s: a page of the match has no values (inserted with "
                     "insert, not kv_insert)", what);
        return NULL;
    }
    return m;
}

/* kv_tags(match) -> int64 array: the tag of each page on the match's path. */
static PyObject *Cache_kv_tags(CacheObject *self, PyObject *arg)
{
    if (cache_closed(self)) return NULL;
    MatchObject *m = kv_match_arg(self, arg, "radixkv.Cache.kv_tags");
    if (!m) return NULL;
    int64_t *tmp = malloc(sizeof(int64_t) * (size_t)(m->m.num_pages ? m->m.num_pages : 1));
    if (!tmp) return PyErr_NoMemory();
    for (int32_t j = 0; j < m->m.num_pages; j++) tmp[j] = tag_of(self, m->m.pages[j]);
    PyObject *r = int64_array(tmp, m->m.num_pages);
    free(tmp);
    return r;
}

/* kv_set_tags(match, start, tags): page start + i of the match's path takes
 * tags[i] (a caller that computes tags only for the pages an insert added). */
static PyObject *Cache_kv_set_tags(CacheObject *self, PyObject *args)
{
    PyObject *mo, *tago;
    long long start;
    if (!PyArg_ParseTuple(args, "OLO:kv_set_tags", &mo, &start, &tago)) return NULL;
    if (cache_closed(self)) return NULL;
    MatchObject *m = kv_match_arg(self, mo, "radixkv.Cache.kv_set_tags");
    if (!m) return NULL;
    vals_view tg;
    if (vals_view_open(tago, "radixkv.Cache.kv_set_tags: tags", &tg) < 0) return NULL;
    if (start < 0 || start + tg.n > m->m.num_pages) {
        PyErr_Format(PyExc_ValueError, "radixkv.Cache.kv_set_tags: pages [%lld, %lld) are not "
                     "all on the match's path of %d pages", start, start + (long long)tg.n,
                     m->m.num_pages);
        PyBuffer_Release(&tg.view);
        return NULL;
    }
    if (tags_reserve(self) < 0) {
        PyBuffer_Release(&tg.view);
        return NULL;
    }
    /* A page retagged holds no event digest: its tag is no longer the one
     * its digest gave, and a chain continued from it would publish a parent
     * hash that does not match. */
    for (Py_ssize_t i = 0; i < tg.n; i++) {
        const int32_t pg = m->m.pages[start + i];
        self->vals_tag[pg] = vals_view_get(&tg, i);
        self->vals_set[pg] &= (uint8_t)~VALS_DIGEST;
    }
    PyBuffer_Release(&tg.view);
    Py_RETURN_NONE;
}

/* ---- SGLang's KV-event hash chain ------------------------------------------
 *
 * The block hash SGLang's tree publishes for a page (BlockStored,
 * BlockRemoved), computed here so that radixkv.sglang publishes the same
 * without a Python object per page:
 *
 *   digest[j] = SHA-256(digest[j-1] (absent before the first page, unless a
 *               prior digest seeds the chain) || page j's tokens as
 *               little-endian u32s; a short last page hashes what it has)
 *   hash[j]   = digest[j]'s first 8 bytes read big-endian, as an int64
 *               (hash_str_to_int64 of the hex digest's first 16 digits)
 *   seeded:     hash[j] = the first 8 bytes, big-endian, as an int64, of
 *               SHA-256(seed || hash[j] as 8 big-endian bytes)
 *               (namespaced_block_hash)
 *
 * SGLang encodes a page holding a token past 2**32 - 1 another way (an 0xff
 * byte, then u64s); the cache holds int32 ids, so such a token is refused. */

/* out = SHA-256(a[0..na) || b[0..nb)); 1, or 0 when libcrypto failed. A
 * page is one or two SHA-256 blocks, so a generic API's fixed cost per call
 * is most of its time: ev_sha256 pads the blocks itself and runs the CPU's
 * SHA instructions where it has them (kv_event_store at page size 1: EVP 102,
 * SHA256_Init/Update/Final 71 ns a page; see ev_sha256.c). */
static int ev_sha256(const uint8_t *a, size_t na, const uint8_t *b, size_t nb, uint8_t *out)
{
    return ev_sha256_pair(a, na, b, nb, out);
}

/* d[0..8) read big-endian as a two's complement int64 (no implementation-
 * defined conversion of a uint64 past INT64_MAX). */
static int64_t ev_be64(const uint8_t *d)
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u = u << 8 | d[i];
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* The chain over le[0 .. 4 * ntok) (tokens as little-endian u32s) in pages
 * of P tokens: digest j into dig[j * EV_DIGEST ..], its block hash into
 * hash[j]. prior: NULL or EV_DIGEST bytes before page 0; seed (have_seed):
 * namespaced_block_hash's seed. Runs without the GIL: 0, or -1 when
 * libcrypto failed (no exception set). */
static int ev_chain(const uint8_t *le, Py_ssize_t ntok, Py_ssize_t P,
                    const uint8_t *prior, int have_seed, const uint8_t *seed, size_t seedlen,
                    uint8_t *dig, int64_t *hash)
{
    /* The digests first, in one pass that keeps each in registers for the
     * next page (ev_sha256.c), then the hashes from them. */
    if (!ev_sha256_chain(prior, le, (size_t)ntok, (size_t)P, dig)) return -1;
    for (Py_ssize_t j = 0, s = 0; s < ntok; j++, s += P) {
        int64_t h = ev_be64(dig + (size_t)j * EV_DIGEST);
        if (have_seed) {
            uint8_t be[8], ns[EV_DIGEST];
            for (int i = 0; i < 8; i++) be[i] = (uint8_t)((uint64_t)h >> (56 - 8 * i));
            if (!ev_sha256(seed, seedlen, be, 8, ns)) return -1;
            h = ev_be64(ns);
        }
        hash[j] = h;
    }
    return 0;
}

/* A call's tokens[from:to]: as little-endian u32 bytes (owned) and, when
 * asked, as the list of ints BlockStored's token_ids takes. */
typedef struct ev_tokens {
    uint8_t *le;    /* 4 * (to - from) bytes */
    PyObject *list; /* NULL unless asked */
} ev_tokens;

static void ev_tokens_release(ev_tokens *t)
{
    free(t->le);
    Py_XDECREF(t->list);
    t->le = NULL;
    t->list = NULL;
}

/* Token i (its value v) stored at out[i - from]; -1 with ValueError when
 * outside SGLang's u32 page encoding. */
static int ev_token_put(ev_tokens *t, Py_ssize_t k, Py_ssize_t i, long long v, const char *what)
{
    if (v < 0 || v > (long long)UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: tokens[%zd]: %lld is outside [0, 4294967295] (the "
                     "u32 page encoding of SGLang's chain)", what, i, v);
        return -1;
    }
    uint8_t *p = t->le + 4 * k;
    for (int b = 0; b < 4; b++) p[b] = (uint8_t)((unsigned long long)v >> (8 * b));
    return 0;
}

/* t filled from tok[from:to] (a sequence of ints, or a 1-D buffer of
 * integers); tok must hold at least to items. 0, or -1 with the exception
 * set and nothing held. */
static int ev_tokens_read(PyObject *tok, Py_ssize_t from, Py_ssize_t to, int want_list,
                          const char *what, ev_tokens *t)
{
    t->list = NULL;
    if (!(t->le = malloc(4 * (size_t)(to - from) + 1))) {
        PyErr_NoMemory();
        return -1;
    }
    if (want_list && !(t->list = PyList_New(to - from))) goto fail;
    if (PyObject_CheckBuffer(tok) && !PyBytes_Check(tok) && !PyByteArray_Check(tok)) {
        vals_view v;
        if (vals_view_open(tok, what, &v) < 0) goto fail;
        int bad = 0;
        if (v.n < to) {
            PyErr_Format(PyExc_ValueError, "%s: tokens has %zd items, the pages need %zd", what,
                         v.n, to);
            bad = 1;
        }
        for (Py_ssize_t i = from; !bad && i < to; i++) {
            int64_t x = vals_view_get(&v, i);
            if (v.kind == 'u' && v.view.itemsize == 8 && x < 0) x = INT64_MAX; /* past u32 */
            if (ev_token_put(t, i - from, i, (long long)x, what) < 0) bad = 1;
            else if (t->list) {
                PyObject *o = PyLong_FromLongLong((long long)x);
                if (!o) bad = 1;
                else PyList_SET_ITEM(t->list, i - from, o);
            }
        }
        PyBuffer_Release(&v.view);
        if (bad) goto fail;
        return 0;
    }
    PyObject *seq = PySequence_Fast(tok, "tokens: expected a sequence of ints or a 1-D buffer "
                                         "of integers");
    if (!seq) goto fail;
    if (PySequence_Fast_GET_SIZE(seq) < to) {
        PyErr_Format(PyExc_ValueError, "%s: tokens has %zd items, the pages need %zd", what,
                     PySequence_Fast_GET_SIZE(seq), to);
        Py_DECREF(seq);
        goto fail;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = from; i < to; i++) {
        PyObject *o = items[i];
        if (!PyLong_Check(o)) {
            PyErr_Format(PyExc_TypeError, "%s: tokens[%zd] is a %s, not an int", what, i,
                         Py_TYPE(o)->tp_name);
            Py_DECREF(seq);
            goto fail;
        }
        int over = 0;
        long long x = PyLong_AsLongLongAndOverflow(o, &over);
        if (over) x = over < 0 ? -1 : LLONG_MAX;
        if (ev_token_put(t, i - from, i, x, what) < 0) {
            Py_DECREF(seq);
            goto fail;
        }
        if (t->list) {
            Py_INCREF(o);
            PyList_SET_ITEM(t->list, i - from, o);
        }
    }
    Py_DECREF(seq);
    return 0;
fail:
    ev_tokens_release(t);
    return -1;
}

/* o (None: *have 0) as a bytes-like object held in b; need >= 0: its
 * exact length. 0, or -1 with TypeError / ValueError naming the argument. */
static int ev_bytes_open(PyObject *o, const char *what, const char *name, Py_ssize_t need,
                         Py_buffer *b, int *have)
{
    *have = 0;
    if (!o || o == Py_None) return 0;
    if (PyObject_GetBuffer(o, b, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %s: expected bytes or None, got %s", what, name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    if (need >= 0 && b->len != need) {
        PyErr_Format(PyExc_ValueError, "%s: %s: %zd bytes, a SHA-256 digest has %zd", what, name,
                     b->len, need);
        PyBuffer_Release(b);
        return -1;
    }
    *have = 1;
    return 0;
}

/* What kv_event_store and sglang_event_hashes each hold through a chain: the
 * optional namespace seed (any length) and prior digest (EV_DIGEST bytes)
 * they were given, the tokens read, and the chain's digests and hashes.
 * ev_call_open() opens both buffers or neither (0, or -1 with the exception
 * set) and clears the rest; ev_call_close() releases whatever is held. */
typedef struct ev_call {
    Py_buffer seed, prior;
    int have_seed, have_prior;
    ev_tokens t;
    uint8_t *dig;
    int64_t *hash;
} ev_call;

static int ev_call_open(PyObject *seed, PyObject *prior, const char *what, ev_call *c)
{
    c->have_prior = 0;
    c->t = (ev_tokens){NULL, NULL};
    c->dig = NULL;
    c->hash = NULL;
    if (ev_bytes_open(seed, what, "seed", -1, &c->seed, &c->have_seed) < 0) return -1;
    if (ev_bytes_open(prior, what, "prior", EV_DIGEST, &c->prior, &c->have_prior) < 0) {
        if (c->have_seed) PyBuffer_Release(&c->seed);
        c->have_seed = 0;
        return -1;
    }
    return 0;
}

static void ev_call_close(ev_call *c)
{
    if (c->have_seed) PyBuffer_Release(&c->seed);
    if (c->have_prior) PyBuffer_Release(&c->prior);
    c->have_seed = c->have_prior = 0;
    ev_tokens_release(&c->t);
    free(c->dig);
    free(c->hash);
    c->dig = NULL;
    c->hash = NULL;
}

/* The chain of le's ntok tokens into fresh dig / hash arrays, the GIL
 * released around a long one (64 pages or more: a few us of hashing, where
 * the release and retake cost ~0.1 us). 0, or -1 with the exception set. */
static int ev_chain_call(const uint8_t *le, Py_ssize_t ntok, Py_ssize_t P, const uint8_t *prior,
                         const Py_buffer *seed, int have_seed, uint8_t **dig, int64_t **hash,
                         const char *what)
{
    const Py_ssize_t npg = (ntok + P - 1) / P;
    *dig = malloc((size_t)EV_DIGEST * (size_t)npg + 1);
    *hash = malloc(sizeof(int64_t) * (size_t)npg + 1);
    if (!*dig || !*hash) {
        free(*dig);
        free(*hash);
        *dig = NULL;
        *hash = NULL;
        PyErr_NoMemory();
        return -1;
    }
    PyThreadState *ts = npg >= 64 ? PyEval_SaveThread() : NULL;
    int rc = ev_chain(le, ntok, P, prior, have_seed, have_seed ? seed->buf : NULL,
                      have_seed ? (size_t)seed->len : 0, *dig, *hash);
    if (ts) PyEval_RestoreThread(ts);
    if (rc < 0) {
        free(*dig);
        free(*hash);
        *dig = NULL;
        *hash = NULL;
        PyErr_Format(rkv_error, "%s: libcrypto's SHA-256 failed", what);
        return -1;
    }
    return 0;
}

/* hash[0..n) as a list of ints; NULL with the exception set. */
static PyObject *ev_hash_list(const int64_t *hash, Py_ssize_t n)
{
    PyObject *l = PyList_New(n);
    for (Py_ssize_t j = 0; l && j < n; j++) {
        PyObject *o = PyLong_FromLongLong((long long)hash[j]);
        if (!o) Py_CLEAR(l);
        else PyList_SET_ITEM(l, j, o);
    }
    return l;
}

/* vals_dig in use (all zero), for a caller about to store a digest; -1
 * with MemoryError. Only kv_event_store keeps digests. */
static int digs_reserve(CacheObject *self)
{
    if (self->vals_dig || !self->vals_pages) return 0;
    if (!(self->vals_dig = table_alloc(EV_DIGEST * (size_t)self->vals_pages))) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The digest kv_event_store stored for page pg since the page's latest
 * adoption, or NULL when none was: an earlier owner's digest, still in the
 * table, would continue the chain from a page this one is not. */
static const uint8_t *digest_of(const CacheObject *self, int32_t pg)
{
    if (!self->vals_dig || pg >= self->vals_pages || !(self->vals_set[pg] & VALS_DIGEST))
        return NULL;
    return self->vals_dig + (size_t)pg * EV_DIGEST;
}

/* kv_event_store(match, start, tokens, seed=None, prior=None) -> (parent,
 * hashes, token_ids): SGLang's event chain for pages start, start + 1, ...
 * of the match's path (the pages an insert adopted, start = prefix_len //
 * page_size), hashed from tokens[start * P : num_pages * P] (the key the
 * insert took). The chain continues page start - 1's digest, which an
 * earlier kv_event_store stored since that page's latest insert (digest_of;
 * ValueError if none), or starts from prior (start 0 only; None:
 * no prior). Each page keeps its digest (the next insert's prior) and its
 * block hash as its tag (what kv_evict hands back). parent: page start - 1's
 * tag, None at start 0; token_ids: the hashed tokens as a list. */
static PyObject *Cache_kv_event_store(CacheObject *self, PyObject *const *args, Py_ssize_t nargs,
                                      PyObject *kwnames)
{
    static const char *const names[] = {"match", "start", "tokens", "seed", "prior", NULL};
    static const char what[] = "radixkv.Cache.kv_event_store";
    PyObject *a[5];
    if (fast_args("kv_event_store", args, nargs, kwnames, names, 3, a) < 0
        || cache_closed(self))
        return NULL;
    MatchObject *m = kv_match_arg(self, a[0], what);
    if (!m) return NULL;
    const long long start = PyLong_AsLongLong(a[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    const int32_t npg = m->m.num_pages, P = self->page_size;
    if (start < 0 || start > npg) {
        PyErr_Format(PyExc_ValueError, "%s: start %lld is not in [0, %d], the match's path's "
                     "pages", what, start, npg);
        return NULL;
    }
    ev_call c;
    if (ev_call_open(a[3], a[4], what, &c) < 0) return NULL;
    PyObject *r = NULL, *parent = NULL, *hl = NULL;
    const uint8_t *from = c.have_prior ? c.prior.buf : NULL;
    if (start > 0) {
        if (c.have_prior) {
            PyErr_Format(PyExc_ValueError, "%s: prior is for a chain from the root (start 0); "
                         "at start %lld page %lld's digest continues it", what, start, start - 1);
            goto out;
        }
        if (!(from = digest_of(self, m->m.pages[start - 1]))) {
            PyErr_Format(PyExc_ValueError, "%s: page %lld of the match's path has no event "
                         "digest (none was stored by kv_event_store since the page was "
                         "inserted, or kv_set_tags retagged it since)", what, start - 1);
            goto out;
        }
        parent = PyLong_FromLongLong((long long)tag_of(self, m->m.pages[start - 1]));
    } else {
        parent = Py_NewRef(Py_None);
    }
    if (!parent
        || ev_tokens_read(a[2], (Py_ssize_t)start * P, (Py_ssize_t)npg * P, 1, what, &c.t) < 0)
        goto out;
    const Py_ssize_t count = npg - (Py_ssize_t)start;
    /* The parent's digest is copied: the hashing runs without the GIL. */
    uint8_t prior_copy[EV_DIGEST];
    if (from) memcpy(prior_copy, from, EV_DIGEST);
    if (ev_chain_call(c.t.le, count * P, P, from ? prior_copy : NULL, &c.seed, c.have_seed,
                      &c.dig, &c.hash, what) < 0
        || !(hl = ev_hash_list(c.hash, count))
        || (count && (tags_reserve(self) < 0 || digs_reserve(self) < 0)))
        goto out;
    for (Py_ssize_t j = 0; j < count; j++) {
        const int32_t pg = m->m.pages[start + j];
        self->vals_tag[pg] = c.hash[j];
        memcpy(self->vals_dig + (size_t)pg * EV_DIGEST, c.dig + (size_t)j * EV_DIGEST, EV_DIGEST);
        self->vals_set[pg] |= VALS_DIGEST;
    }
    r = PyTuple_Pack(3, parent, hl, c.t.list);
out:
    Py_XDECREF(parent);
    Py_XDECREF(hl);
    ev_call_close(&c);
    return r;
}

/* kv_evict(num_tokens, tags=False, dlpack=False) -> (freed_tokens, int64
 * values of the freed pages in the order the kind freed them[, int64 tag of
 * each freed page]); the values as a DLPack capsule with dlpack.
 *
 * One pass over the pool's free log, which holds runs of consecutive page
 * ids (an evicted leaf's pages are mostly runs, as the pool hands them out,
 * and a leaf freed right after its neighbour extends its run): the run's
 * values are one copy (page g's sit at g * P) and its set flags are checked
 * and cleared with one memchr and one memset, where a check, a copy and a
 * clearing pass each went page by page (about 9 us per call on the ~1,800
 * pages the replay of sglang_cache_bench evicts). */
static PyObject *Cache_kv_evict(CacheObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    static const char *const names[] = {"num_tokens", "tags", "dlpack", NULL};
    PyObject *a[3];
    if (fast_args("kv_evict", args, nargs, kwnames, names, 1, a) < 0) return NULL;
    long long n = PyLong_AsLongLong(a[0]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    int want_tags = flag_arg(a[1]), dlpack = flag_arg(a[2]);
    if (want_tags < 0 || dlpack < 0 || cache_closed(self)) return NULL;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "radixkv.Cache.kv_evict: %lld tokens (need >= 0)", n);
        return NULL;
    }
    self->epoch++;
    uint64_t mark = page_pool_free_mark(&self->pool);
    int64_t freed = cache_evict(self->c, n);
    const page_run *runs = NULL;
    int32_t nruns = 0;
    rkv_status st = page_pool_freed_since(&self->pool, mark, &runs, &nruns);
    if (st != RKV_OK) {
        if (self->vals_set) vals_forget_uncached(self); /* the eviction itself happened */
        return raise_status(st, "radixkv.Cache.kv_evict", "the free log");
    }
    const int64_t np = (int64_t)(self->pool.freed_total - mark); /* pages in the runs */
    const int32_t P = self->page_size;
    int64_t *dst = NULL, *tdst = NULL;
    PyObject *vo = out_int64_new((Py_ssize_t)np * P, dlpack, &dst);
    PyObject *to = vo && want_tags ? out_int64_new(np, 0, &tdst) : NULL;
    /* Every freed page forgets its values, whatever happens next: the
     * eviction itself happened. */
    int all_set = vo && (to || !want_tags);
    const int64_t have = self->vals_pages;
    for (int64_t k = 0, j = 0; k < nruns; j += runs[k++].count) {
        const int32_t pg = runs[k].first, cnt = runs[k].count;
        /* The set flags are read only where a page may lack values
         * (vals_partial; the sanitizer build checks they are all set
         * where not). */
#ifdef __SANITIZE_ADDRESS__
        if (!self->vals_partial
            && ((int64_t)pg + cnt > have || memchr(self->vals_set + pg, 0, (size_t)cnt))) {
            fprintf(stderr, "radixkv: _radixkv.c kv_evict: pages %d..%d: one without values "
                    "while vals_partial is 0\n", pg, pg + cnt - 1);
            abort();
        }
#endif
        if (all_set && (int64_t)pg + cnt <= have
            && (!self->vals_partial || !memchr(self->vals_set + pg, 0, (size_t)cnt))) {
            vals_gather_run(self, dst + j * P, pg, cnt);
            if (tdst)
                for (int32_t q = 0; q < cnt; q++) tdst[j + q] = tag_of(self, pg + q);
        } else {
            all_set = 0;
        }
        if (pg < have)
            memset(self->vals_set + pg, 0, (size_t)((int64_t)pg + cnt <= have ? cnt : have - pg));
    }
    if (!vo || (want_tags && !to)) {
        Py_XDECREF(vo);
        return NULL;
    }
    if (!all_set) {
        Py_DECREF(vo);
        Py_XDECREF(to);
        PyErr_Format(PyExc_ValueError, "radixkv.Cache.kv_evict: %lld tokens evicted, but a page "
                     "had no values (inserted with insert, not kv_insert)", (long long)freed);
        return NULL;
    }
    if (!(vo = out_int64_done(vo, dlpack))) {
        Py_XDECREF(to);
        return NULL;
    }
    if (!want_tags) return Py_BuildValue("(LN)", (long long)freed, vo);
    if (!(to = out_int64_done(to, 0))) {
        Py_DECREF(vo);
        return NULL;
    }
    return Py_BuildValue("(LNN)", (long long)freed, vo, to);
}

static PyObject *Cache_get_evictable(CacheObject *self, void *unused)
{
    if (cache_closed(self)) return NULL;
    cache_sizes s;
    cache_get_sizes(self->c, &s);
    return PyLong_FromLongLong(s.evictable_tokens);
}

static PyObject *Cache_get_protected(CacheObject *self, void *unused)
{
    if (cache_closed(self)) return NULL;
    cache_sizes s;
    cache_get_sizes(self->c, &s);
    return PyLong_FromLongLong(s.protected_tokens);
}

static int dict_set_i64(PyObject *d, const char *k, long long v)

{
    PyObject *o = PyLong_FromLongLong(v);
    if (!o) return -1;
    int r = PyDict_SetItemString(d, k, o);
    Py_DECREF(o);
    return r;
}

static PyObject *Cache_sizes(CacheObject *self, PyObject *unused)
{
    if (cache_closed(self)) return NULL;
    cache_sizes s;
    cache_get_sizes(self->c, &s);
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    if (dict_set_i64(d, "evictable_tokens", s.evictable_tokens) < 0
        || dict_set_i64(d, "protected_tokens", s.protected_tokens) < 0
        || dict_set_i64(d, "pinned_tokens", s.pinned_tokens) < 0
        || dict_set_i64(d, "num_nodes", s.num_nodes) < 0
        || dict_set_i64(d, "free_pages", self->pool.num_free) < 0
        || dict_set_i64(d, "inflight_pages", self->pool.num_inflight) < 0
        || dict_set_i64(d, "cached_pages", self->pool.num_cached) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *Cache_stats(CacheObject *self, PyObject *unused)
{
    if (cache_closed(self)) return NULL;
    const cache_stats *s = &self->c->stats;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    if (dict_set_i64(d, "match_calls", (long long)s->match_calls) < 0
        || dict_set_i64(d, "insert_calls", (long long)s->insert_calls) < 0
        || dict_set_i64(d, "evict_calls", (long long)s->evict_calls) < 0
        || dict_set_i64(d, "matched_tokens", (long long)s->matched_tokens) < 0
        || dict_set_i64(d, "inserted_tokens", (long long)s->inserted_tokens) < 0
        || dict_set_i64(d, "evicted_tokens", (long long)s->evicted_tokens) < 0
        || dict_set_i64(d, "splits", (long long)s->splits) < 0
        || dict_set_i64(d, "hash_computations", (long long)s->hash_computations) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *Cache_check(CacheObject *self, PyObject *unused)
{
    if (cache_closed(self)) return NULL;
    char err[512] = "";
    rkv_status st = cache_check(self->c, err, sizeof err);
    if (st == RKV_OK) st = page_pool_check(&self->pool, err, sizeof err);
    if (st != RKV_OK) return raise_status(st, "radixkv.Cache.check", err);
    Py_RETURN_NONE;
}

static PyObject *Cache_reset(CacheObject *self, PyObject *unused)
{
    if (cache_closed(self)) return NULL;
    cache_teardown(self);
    if (self->vals_set) memset(self->vals_set, 0, (size_t)self->vals_pages);
    if (cache_build(self) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Cache_close(CacheObject *self, PyObject *unused)
{
    cache_teardown(self);
    Py_RETURN_NONE;
}

static PyObject *Cache_enter(CacheObject *self, PyObject *unused)
{
    if (cache_closed(self)) return NULL;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Cache_exit(CacheObject *self, PyObject *args)
{
    cache_teardown(self);
    Py_RETURN_FALSE;
}

static PyObject *Cache_get_closed(CacheObject *self, void *unused)
{
    return PyBool_FromLong(self->c == NULL);
}

static PyObject *Cache_get_kind(CacheObject *self, void *unused)
{
    if (cache_closed(self)) return NULL;
    return PyUnicode_FromString(self->c->ops->name);
}

static PyObject *Cache_get_page_size(CacheObject *self, void *unused)
{
    return PyLong_FromLong(self->page_size);
}

static PyObject *Cache_get_num_pages(CacheObject *self, void *unused)
{
    return PyLong_FromLong(self->num_pages);
}

static PyObject *Cache_get_clock(CacheObject *self, void *unused)
{
    if (cache_closed(self)) return NULL;
    uint64_t t;
    if (!cache_clock(self->c, &t)) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(t);
}

static PyMethodDef Cache_methods[] = {
    {"match", (PyCFunction)(void (*)(void))Cache_match, METH_VARARGS | METH_KEYWORDS,
     "match(tokens, namespace=0) -> Match: the longest cached prefix of tokens, cut to whole "
     "pages. Advances the clock (radix, trie)."},
    {"insert", (PyCFunction)(void (*)(void))Cache_insert, METH_VARARGS | METH_KEYWORDS,
     "insert(tokens, pages, namespace=0) -> int: store tokens (cut to whole pages) with "
     "pages[0 .. len(tokens) // page_size); returns how many leading tokens were already "
     "cached. Pages beyond that become the cache's; the caller frees the rest of its own."},
    {"lock", (PyCFunction)Cache_lock, METH_O,
     "lock(match): protect the match's entries from eviction (only before the next evict)."},
    {"unlock", (PyCFunction)Cache_unlock, METH_O, "unlock(match): undo lock(match)."},
    {"evict", (PyCFunction)Cache_evict, METH_O,
     "evict(n_tokens) -> int: evict unlocked entries until n_tokens are freed or none are "
     "left; returns the tokens freed."},
    {"evict_pages", (PyCFunction)Cache_evict_pages, METH_O,
     "evict_pages(n_tokens) -> (int, page ids): evict as evict() does; also the pages it "
     "freed, in the order the kind freed them."},
    {"alloc", (PyCFunction)Cache_alloc, METH_O,
     "alloc(n) -> page ids: n free pages, now in flight (radixkv.OutOfPages when too few)."},
    {"free", (PyCFunction)Cache_free, METH_O, "free(pages): return in-flight pages to the pool."},
    {"kv_insert", (PyCFunction)(void (*)(void))Cache_kv_insert, METH_FASTCALL | METH_KEYWORDS,
     "kv_insert(tokens, values, namespace=None, tags=None) -> (prefix_len, Match): insert with "
     "a value per token (and a tag per page) kept for the pages the cache adopts; values is a "
     "1-D buffer of integers or the DLPack capsule of a 1-D CPU integer tensor "
     "(torch.utils.dlpack.to_dlpack). Contiguous "
     "int64 tokens on a radix cache are walked in place; a bad id is then found past the "
     "cached part only."},
    {"kv_match", (PyCFunction)(void (*)(void))Cache_kv_match, METH_FASTCALL | METH_KEYWORDS,
     "kv_match(tokens, namespace=None, into=None, limit=None) -> Match of the page-aligned "
     "head of tokens[:limit] (every token with limit None; the tokens are not copied). "
     "Contiguous int64 tokens on a radix cache are walked in place, and an id "
     "outside [0, 2**31) ends the match instead of raising. into=(cls, holder, k, tail, "
     "empty), cls a tuple subclass: empty for an empty match, else "
     "tuple.__new__(cls, (length,) + (holder(match),) * k + tail); a holder (cls,) is made "
     "as object.__new__(cls) with its match attribute set, without calling it."},
    {"kv_insert_params", (PyCFunction)(void (*)(void))Cache_kv_insert_params, METH_FASTCALL,
     "kv_insert_params(spec, params) -> result: SGLang's RadixCache.insert(params) in one "
     "call for a plain call (a CPU tensor of values; a key without limit, namespace or "
     "bigrams), general(owner, key, value) for any other (None: nothing done, when general "
     "is None). spec = (to_values, value_type, holder, root, result, template, fresh, general, "
     "owner as a weak reference): result(prefix_len=, last_device_node=holder(match) or root), "
     "built as object.__new__(result) with template's fields set in order (fresh: those that "
     "get new empty containers), or by calling result when template is None."},
    {"kv_lock", (PyCFunction)(void (*)(void))Cache_kv_lock, METH_FASTCALL,
     "kv_lock(spec, node) -> lock: lock node.match (unless None) and answer "
     "lock_cls(node, receipt_cls()); spec = (lock_cls, lock_template, lock_fresh, receipt_cls, "
     "receipt_template, receipt_fresh), templates as kv_insert_params takes them."},
    {"kv_match_params", (PyCFunction)(void (*)(void))Cache_kv_match_params, METH_FASTCALL,
     "kv_match_params(spec, params) -> result: SGLang's RadixCache.match_prefix(params) in "
     "one call for a key without namespace or bigrams and a limit None or >= 0 "
     "(kv_match(key.token_ids, into=into, limit=key.limit)), general(owner, params) for any "
     "other (None when general is None). spec = (into, general, owner as a weak reference)."},
    {"kv_evict_params", (PyCFunction)(void (*)(void))Cache_kv_evict_params, METH_FASTCALL,
     "kv_evict_params(spec, params) -> result: SGLang's RadixCache.evict(params) in one call "
     "for params.num_tokens an int > 0 (kv_evict, then owner.token_to_kv_pool_allocator"
     ".free_segment(to_tensor(values), start_pos=0) when tokens were freed, and "
     "result(num_tokens_evicted=freed)), general(owner, params) for any other. spec = "
     "(to_tensor, result, template, fresh, general, owner as a weak reference)."},
    {"kv_path_values", (PyCFunction)(void (*)(void))Cache_kv_path_values, METH_FASTCALL,
     "kv_path_values(spec, node) -> tensor: empty if node.match is None, else "
     "to_tensor(kv_values(node.match, dlpack=True)); spec = (to_tensor, empty)."},
    {"kv_unlock", (PyCFunction)Cache_kv_unlock, METH_O,
     "kv_unlock(lock): unlock lock.node.match (nothing for None, or a None match)."},
    {"kv_reserve", (PyCFunction)Cache_kv_reserve, METH_NOARGS,
     "kv_reserve(): allocate and touch kv_insert's value table for every page of the pool "
     "now (num_pages * page_size int64s), so that no insert faults its memory in or grows it."},
    {"kv_values", (PyCFunction)(void (*)(void))Cache_kv_values, METH_FASTCALL | METH_KEYWORDS,
     "kv_values(match, dlpack=False) -> int64 array: the values kv_insert stored on the "
     "match's path; with dlpack, a DLPack capsule of them (torch.from_dlpack takes it "
     "without a copy)."},
    {"kv_tags", (PyCFunction)Cache_kv_tags, METH_O,
     "kv_tags(match) -> int64 array: the tag kv_insert / kv_set_tags gave each page of the "
     "match's path."},
    {"kv_set_tags", (PyCFunction)Cache_kv_set_tags, METH_VARARGS,
     "kv_set_tags(match, start, tags): tag pages start, start + 1, ... of the match's path "
     "(a retagged page keeps no event digest: kv_event_store cannot continue a chain from it)."},
    {"kv_event_store", (PyCFunction)(void (*)(void))Cache_kv_event_store,
     METH_FASTCALL | METH_KEYWORDS,
     "kv_event_store(match, start, tokens, seed=None, prior=None) -> (parent, hashes, "
     "token_ids): SGLang's KV-event block hashes of pages start, start + 1, ... of the match's "
     "path (SHA-256 chain continuing page start - 1's digest, which kv_event_store must have "
     "stored since that page was inserted (ValueError if not), or from prior at start 0; "
     "namespaced with seed), each kept as the page's tag and digest; parent is page "
     "start - 1's tag (None at 0), token_ids the hashed tokens."},
    {"kv_evict", (PyCFunction)(void (*)(void))Cache_kv_evict, METH_FASTCALL | METH_KEYWORDS,
     "kv_evict(num_tokens, tags=False, dlpack=False) -> (freed_tokens, int64 values of the "
     "freed pages[, int64 tag of each freed page when tags]); with dlpack the values are a "
     "DLPack capsule (torch.from_dlpack takes it without a copy)."},
    {"sizes", (PyCFunction)Cache_sizes, METH_NOARGS,
     "sizes() -> dict: evictable/protected/pinned tokens, nodes, free/inflight/cached pages."},
    {"stats", (PyCFunction)Cache_stats, METH_NOARGS, "stats() -> dict: the call counters."},
    {"check", (PyCFunction)Cache_check, METH_NOARGS,
     "check(): full consistency check of the cache and its pool; radixkv.Error on failure."},
    {"reset", (PyCFunction)Cache_reset, METH_NOARGS,
     "reset(): an empty cache and pool of the same configuration; older matches go stale."},
    {"close", (PyCFunction)Cache_close, METH_NOARGS, "close(): free everything; idempotent."},
    {"__enter__", (PyCFunction)Cache_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Cache_exit, METH_VARARGS, NULL},
    {NULL},
};

static PyGetSetDef Cache_getset[] = {
    {"closed", (getter)Cache_get_closed, NULL, "True once close() was called.", NULL},
    {"evictable_tokens", (getter)Cache_get_evictable, NULL, "sizes()['evictable_tokens'].",
     NULL},
    {"protected_tokens", (getter)Cache_get_protected, NULL, "sizes()['protected_tokens'].",
     NULL},
    {"kind", (getter)Cache_get_kind, NULL, "The kind's registered name.", NULL},
    {"page_size", (getter)Cache_get_page_size, NULL, "Tokens per page.", NULL},
    {"num_pages", (getter)Cache_get_num_pages, NULL, "Pages in the pool.", NULL},
    {"clock", (getter)Cache_get_clock, NULL, "The logical clock (None: the kind has none).",
     NULL},
    {NULL},
};

static PyTypeObject CacheType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "radixkv.Cache",
    .tp_basicsize = sizeof(CacheObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Cache(kind='radix', page_size=1, num_pages, *, policy=None, hash_fn=None, "
              "hash_duplicates=None)\n\nOne prefix cache of a registered kind (radixkv.kinds()) "
              "over a pool of num_pages pages of page_size tokens; policy is any of "
              "radixkv.policies().",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Cache_init,
    .tp_dealloc = (destructor)Cache_dealloc,
    .tp_methods = Cache_methods,
    .tp_getset = Cache_getset,
};

/* ---- Match ---------------------------------------------------------------- */

static void Match_dealloc(MatchObject *self)
{
    CacheObject *c = self->owner;
    /* the seq counts its locks (lock may be called again while locked) */
    while (self->m.locks > 0 && c && c->c && c->generation == self->generation)
        if (cache_unlock(c->c, &self->m) != RKV_OK) break;
    cache_seq_free(&self->m);
    if (self->runs != self->run_buf) free(self->runs);
    Py_XDECREF(c);
    PyObject_Free(self);
}

static int Match_getbuffer(MatchObject *self, Py_buffer *view, int flags)
{
    if (flags & PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "radixkv.Match: the page ids are read-only");
        view->obj = NULL;
        return -1;
    }
    if (match_pages(self) < 0) {
        view->obj = NULL;
        return -1;
    }
    view->obj = (PyObject *)self;
    Py_INCREF(self);
    view->buf = self->m.pages;
    view->len = (Py_ssize_t)sizeof(int32_t) * self->m.num_pages;
    view->readonly = 1;
    view->itemsize = sizeof(int32_t);
    view->format = (flags & PyBUF_FORMAT) ? "i" : NULL;
    view->ndim = 1;
    self->shape = self->m.num_pages;
    view->shape = (flags & PyBUF_ND) ? &self->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? &view->itemsize : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    self->exports++;
    return 0;
}

static void Match_releasebuffer(MatchObject *self, Py_buffer *view)
{
    self->exports--;
}

static PyBufferProcs Match_as_buffer = {
    .bf_getbuffer = (getbufferproc)Match_getbuffer,
    .bf_releasebuffer = (releasebufferproc)Match_releasebuffer,
};

static PyObject *Match_get_length(MatchObject *self, void *unused)
{
    return PyLong_FromLong(self->m.len);
}

static PyObject *Match_get_pages(MatchObject *self, void *unused)
{
    return pages_object((PyObject *)self);
}

static PyObject *Match_get_locked(MatchObject *self, void *unused)
{
    return PyLong_FromLong(self->m.locks);
}

static PyObject *Match_get_namespace(MatchObject *self, void *unused)
{
    return PyLong_FromUnsignedLongLong(self->m.ns);
}

static Py_ssize_t Match_len(MatchObject *self)
{
    return self->m.len;
}

static PyObject *Match_repr(MatchObject *self)
{
    if (match_pages(self) < 0) return NULL;
    return PyUnicode_FromFormat("radixkv.Match(length=%d, pages=%d, locked=%d)", self->m.len,
                                self->m.num_pages, self->m.locks);
}

static PyGetSetDef Match_getset[] = {
    {"length", (getter)Match_get_length, NULL, "Matched tokens (a multiple of page_size).",
     NULL},
    {"pages", (getter)Match_get_pages, NULL,
     "The matched page ids (numpy.int32 when numpy is installed, else a memoryview).", NULL},
    {"locked", (getter)Match_get_locked, NULL, "How many Cache.lock calls hold this match.",
     NULL},
    {"namespace", (getter)Match_get_namespace, NULL, "The namespace the match was made in.",
     NULL},
    {NULL},
};

static PySequenceMethods Match_as_sequence = {.sq_length = (lenfunc)Match_len};

static PyTypeObject MatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "radixkv.Match",
    .tp_basicsize = sizeof(MatchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The result of Cache.match: length, page ids (also through the buffer protocol, "
              "int32) and the handle Cache.lock / Cache.unlock take. len(match) is its length.",
    .tp_dealloc = (destructor)Match_dealloc,
    .tp_getset = Match_getset,
    .tp_as_buffer = &Match_as_buffer,
    .tp_as_sequence = &Match_as_sequence,
    .tp_repr = (reprfunc)Match_repr,
};

/* ---- registries ----------------------------------------------------------- */

static PyObject *names_list(const char *const *names)
{
    PyObject *l = PyList_New(0);
    for (int i = 0; l && names[i]; i++) {
        PyObject *s = PyUnicode_FromString(names[i]);
        if (!s || PyList_Append(l, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(s);
    }
    return l;
}

static PyObject *mod_kinds(PyObject *m, PyObject *unused)
{
    return names_list(cache_kind_names);
}

static PyObject *mod_policies(PyObject *m, PyObject *unused)
{
    return names_list(evict_policy_name_list);
}

static PyObject *mod_hash_functions(PyObject *m, PyObject *unused)
{
    return names_list(block_hash_fn_names);
}

static PyObject *mod_namespace_id(PyObject *m, PyObject *arg)
{
    uint64_t ns;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "namespace_id: expected a str");
        return NULL;
    }
    if (namespace_from(arg, &ns) < 0) return NULL;
    return PyLong_FromUnsignedLongLong(ns);
}

/* ---- commands in process -------------------------------------------------- */

/* One command at a time: the commands keep static output buffers, and fd 2
 * and the signal handlers are the process's. */
static pthread_mutex_t command_lock = PTHREAD_MUTEX_INITIALIZER;

static PyObject *mod_command(PyObject *m, PyObject *args)
{
    const char *name;
    PyObject *argl;
    if (!PyArg_ParseTuple(args, "sO!:_command", &name, &PyList_Type, &argl)) return NULL;
    int (*fn)(int, char **) = !strcmp(name, "cache-sim") ? cmd_cache_sim
                            : !strcmp(name, "run") ? cmd_run : NULL;
    if (!fn) {
        PyErr_Format(PyExc_ValueError, "_command: unknown command '%s' (cache-sim, run)", name);
        return NULL;
    }
    Py_ssize_t argc = PyList_GET_SIZE(argl) + 1;
    char **argv = calloc((size_t)argc + 1, sizeof *argv);
    if (!argv) return PyErr_NoMemory();
    argv[0] = (char *)name;
    for (Py_ssize_t i = 1; i < argc; i++) {
        PyObject *s = PyList_GET_ITEM(argl, i - 1);
        const char *c = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
        if (!c) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "_command: argument %zd is not a str", i);
            free(argv);
            return NULL;
        }
        argv[i] = (char *)c; /* the list keeps the strings alive during the call */
    }
    FILE *errf = tmpfile();
    if (!errf) {
        free(argv);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    int rc, interrupted;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&command_lock);
    struct sigaction old_int, old_term;
    sigaction(SIGINT, NULL, &old_int);
    sigaction(SIGTERM, NULL, &old_term);
    interrupt_reset();
    fflush(stderr);
    int saved = dup(2);
    if (saved >= 0) dup2(fileno(errf), 2);
    rc = fn((int)argc, argv);
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    interrupted = interrupt_pending();
    /* Python's own handlers back: a Ctrl-C after the call is Python's again. */
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    interrupt_reset();
    pthread_mutex_unlock(&command_lock);
    Py_END_ALLOW_THREADS
    free(argv);
    long size = (fseek(errf, 0, SEEK_END) == 0) ? ftell(errf) : 0;
    char *text = malloc((size_t)(size > 0 ? size : 0) + 1);
    size_t got = 0;
    if (text) {
        rewind(errf);
        got = size > 0 ? fread(text, 1, (size_t)size, errf) : 0;
        text[got] = 0;
    }
    fclose(errf);
    if (!text) return PyErr_NoMemory();
    PyObject *r = Py_BuildValue("(is#i)", rc, text, (Py_ssize_t)got, interrupted);
    free(text);
    return r;
}

/* sglang_event_hashes(tokens, page_size, prior=None, seed=None) -> (digests,
 * hashes): SGLang's event chain over tokens alone (the code kv_event_store
 * runs), for tests against SGLang's own get_hash_str, hash_str_to_int64 and
 * namespaced_block_hash. A short last page is hashed as SGLang hashes it. */
static PyObject *mod_sglang_event_hashes(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                         PyObject *kwnames)
{
    static const char *const names[] = {"tokens", "page_size", "prior", "seed", NULL};
    static const char what[] = "radixkv.sglang_event_hashes";
    PyObject *a[4];
    (void)mod;
    if (fast_args("sglang_event_hashes", args, nargs, kwnames, names, 2, a) < 0) return NULL;
    const long long P = PyLong_AsLongLong(a[1]);
    if (P == -1 && PyErr_Occurred()) return NULL;
    if (P < 1 || P > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: page_size %lld is not in [1, %d]", what, P,
                     INT32_MAX);
        return NULL;
    }
    Py_ssize_t n = PyObject_Length(a[0]);
    if (n < 0) return NULL;
    ev_call c;
    if (ev_call_open(a[3], a[2], what, &c) < 0) return NULL;
    PyObject *r = NULL, *dl = NULL, *hl = NULL;
    if (ev_tokens_read(a[0], 0, n, 0, what, &c.t) < 0
        || ev_chain_call(c.t.le, n, (Py_ssize_t)P, c.have_prior ? c.prior.buf : NULL, &c.seed,
                         c.have_seed, &c.dig, &c.hash, what) < 0)
        goto out;
    const Py_ssize_t npg = (n + (Py_ssize_t)P - 1) / (Py_ssize_t)P;
    if (!(hl = ev_hash_list(c.hash, npg)) || !(dl = PyList_New(npg))) goto out;
    for (Py_ssize_t j = 0; j < npg; j++) {
        PyObject *d = PyBytes_FromStringAndSize((const char *)c.dig + (size_t)j * EV_DIGEST,
                                                EV_DIGEST);
        if (!d) goto out;
        PyList_SET_ITEM(dl, j, d);
    }
    r = PyTuple_Pack(2, dl, hl);
out:
    Py_XDECREF(dl);
    Py_XDECREF(hl);
    ev_call_close(&c);
    return r;
}

/* _sha256_for_tests(data, split, portable) -> bytes: SHA-256(data[:split] ||
 * data[split:]) through the chain's own ev_sha256, or through libcrypto alone
 * when portable, so tests compare both with hashlib on every message length
 * and every split of it. */
static PyObject *mod_sha256_for_tests(PyObject *mod, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t split;
    int portable;
    (void)mod;
    if (!PyArg_ParseTuple(args, "y*np:_sha256_for_tests", &data, &split, &portable)) return NULL;
    if (split < 0 || split > data.len) {
        PyErr_Format(PyExc_ValueError, "radixkv._sha256_for_tests: split %zd is not in [0, %zd]",
                     split, data.len);
        PyBuffer_Release(&data);
        return NULL;
    }
    const uint8_t *p = data.buf;
    uint8_t d[EV_DIGEST];
    const size_t na = (size_t)split, nb = (size_t)(data.len - split);
    const int ok = portable ? ev_sha256_pair_portable(na ? p : NULL, na, nb ? p + na : NULL, nb, d)
                            : ev_sha256(na ? p : NULL, na, nb ? p + na : NULL, nb, d);
    PyBuffer_Release(&data);
    if (!ok) {
        PyErr_SetString(rkv_error, "radixkv._sha256_for_tests: libcrypto's SHA-256 failed");
        return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)d, EV_DIGEST);
}

/* _sha256_route(force_portable=None) -> (uses SHA instructions, previous
 * force): with a bool, routes every chain to libcrypto (True) or back (False)
 * first; tests use it to compare whole chains on both paths. */
static PyObject *mod_sha256_route(PyObject *mod, PyObject *args)
{
    PyObject *force = Py_None;
    (void)mod;
    if (!PyArg_ParseTuple(args, "|O:_sha256_route", &force)) return NULL;
    int prev;
    if (force == Py_None) {
        prev = ev_sha256_force_portable(0);
        ev_sha256_force_portable(prev);
    } else {
        const int on = PyObject_IsTrue(force);
        if (on < 0) return NULL;
        prev = ev_sha256_force_portable(on);
    }
    return Py_BuildValue("(OO)", ev_sha256_uses_sha_ni() ? Py_True : Py_False,
                         prev ? Py_True : Py_False);
}

/* _fault_alloc_for_tests(nth, stay=False) -> bool: in a build with
 * -Dfault_injection=true, the nth allocation radixkv's own code makes from
 * now fails (stay: it and every one after it, until the next call; nth 0:
 * none), and True; False, with nothing armed, in any other build. For the
 * tests of paths only a failed allocation reaches (a free log lost). */
static PyObject *mod_fault_alloc_for_tests(PyObject *mod, PyObject *args)
{
    long long nth;
    int stay = 0;
    (void)mod;
    if (!PyArg_ParseTuple(args, "L|p:_fault_alloc_for_tests", &nth, &stay)) return NULL;
    if (nth < 0) {
        PyErr_Format(PyExc_ValueError, "radixkv._fault_alloc_for_tests: nth %lld (need >= 0)",
                     nth);
        return NULL;
    }
#ifdef RKV_FAULT_INJECTION
    if (stay) fault_alloc_arm_from(nth);
    else fault_alloc_arm(nth);
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef module_methods[] = {
    {"_fault_alloc_for_tests", mod_fault_alloc_for_tests, METH_VARARGS,
     "_fault_alloc_for_tests(nth, stay=False) -> bool: in a fault-injection build, fail the "
     "nth allocation of radixkv's code from now (stay: and every later one; 0: none); False "
     "in other builds."},
    {"_sha256_for_tests", mod_sha256_for_tests, METH_VARARGS,
     "_sha256_for_tests(data, split, portable) -> bytes: SHA-256 of data, as the event "
     "chain computes it from data[:split] and data[split:] (portable: libcrypto alone)."},
    {"_sha256_route", mod_sha256_route, METH_VARARGS,
     "_sha256_route(force_portable=None) -> (uses_sha_ni, previous_force): the event chain's "
     "SHA-256 route, first forced to libcrypto (True) or freed (False) when given."},
    {"sglang_event_hashes", (PyCFunction)(void (*)(void))mod_sglang_event_hashes,
     METH_FASTCALL | METH_KEYWORDS,
     "sglang_event_hashes(tokens, page_size, prior=None, seed=None) -> (digests, hashes): "
     "SGLang's KV-event chain over tokens (32-byte SHA-256 digest and int64 block hash per "
     "page, namespaced with seed), as Cache.kv_event_store computes it."},
    {"kinds", mod_kinds, METH_NOARGS, "kinds() -> list[str]: the registered cache kinds."},
    {"policies", mod_policies, METH_NOARGS,
     "policies() -> list[str]: the registered eviction policies (the first is the default)."},
    {"hash_functions", mod_hash_functions, METH_NOARGS,
     "hash_functions() -> list[str]: the block hashes of the hash kinds."},
    {"namespace_id", mod_namespace_id, METH_O,
     "namespace_id(name) -> int: the 64-bit namespace of a name, as a trace's "
     "\"namespace\" field gives it."},
    {"_command", mod_command, METH_VARARGS,
     "_command(name, args) -> (exit status, stderr text, interrupted): a radixkv command "
     "in this process, the GIL released."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "radixkv._radixkv",
    .m_doc = "radixkv's C library: prefix caches and the commands (see radixkv).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__radixkv(void)
{
    if (PyType_Ready(&CacheType) < 0 || PyType_Ready(&MatchType) < 0
        || params_names_init() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    rkv_error = PyErr_NewExceptionWithDoc("radixkv.Error",
        "A radixkv library error, with the library's message.", PyExc_RuntimeError, NULL);
    rkv_out_of_pages = rkv_error ? PyErr_NewExceptionWithDoc("radixkv.OutOfPages",
        "The page pool has too few free pages.", rkv_error, NULL) : NULL;
    if (!rkv_out_of_pages) goto fail;
    Py_INCREF(rkv_error);
    Py_INCREF(rkv_out_of_pages);
    Py_INCREF(&CacheType);
    Py_INCREF(&MatchType);
    if (PyModule_AddObject(m, "Error", rkv_error) < 0
        || PyModule_AddObject(m, "OutOfPages", rkv_out_of_pages) < 0
        || PyModule_AddObject(m, "Cache", (PyObject *)&CacheType) < 0
        || PyModule_AddObject(m, "Match", (PyObject *)&MatchType) < 0)
        goto fail;
    /* numpy is optional: page ids come back as numpy.int32 arrays when it is
     * importable, as memoryviews otherwise. */
    PyObject *np = PyImport_ImportModule("numpy");
    if (np) {
        numpy_frombuffer = PyObject_GetAttrString(np, "frombuffer");
        numpy_int32 = PyObject_GetAttrString(np, "int32");
        numpy_int64 = PyObject_GetAttrString(np, "int64");
        Py_DECREF(np);
        if (!numpy_frombuffer || !numpy_int32 || !numpy_int64) {
            Py_CLEAR(numpy_frombuffer);
            Py_CLEAR(numpy_int32);
            Py_CLEAR(numpy_int64);
        }
    }
    PyErr_Clear();
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
