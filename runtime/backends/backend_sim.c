/* backend_sim.c - the roofline-clocked backend without a model; see backend_sim.h. */
#include "backend_sim.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rkv_core.h"

typedef struct sim_backend {
    backend base;
    model_config model;
    sim_profile prof;
    /* Per KV slot (num_pages * page_size): the chained context hash and the
     * position + 1 written there (0: never written). calloc'd, so untouched
     * pages of a large pool cost no memory. */
    uint64_t *slot_hash;
    int32_t *slot_pos;
} sim_backend;

/* The built-in profiles: runtime/backends/profiles/<id>.json, embedded byte
 * for byte by profiles/embed.py (so the hash a run reports is the file's). */
extern const unsigned char *const sim_profile_texts[];
extern const size_t sim_profile_lens[];

/* ---- profile files -------------------------------------------------------- */

/* Errors name the profile (its id or path) and the field, e.g.
 * "sim profile h100@peer: field efficiency.attn: want a number in (0, 1]". */
typedef struct pctx {
    const char *where;
    char *err;
    size_t errlen;
} pctx;

static rkv_status perr(const pctx *c, const char *field, const char *what)
{
    snprintf(c->err, c->errlen, "sim profile %s: field %s: %s", c->where, field, what);
    return RKV_EINVAL;
}

/* Every key of obj must be one of keys (NULL-terminated): a misspelt field is
 * refused, never silently left at a default. */
static rkv_status only_keys(const pctx *c, json_t *obj, const char *prefix,
                            const char *const *keys)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        int i = 0;
        while (keys[i] && strcmp(keys[i], k)) i++;
        if (!keys[i]) {
            char f[96];
            snprintf(f, sizeof f, "%s%s%s", prefix, *prefix ? "." : "", k);
            return perr(c, f, "unknown field");
        }
    }
    return RKV_OK;
}

static json_t *section(const pctx *c, json_t *root, const char *name, const char *const *keys,
                       rkv_status *st)
{
    json_t *o = json_object_get(root, name);
    if (!json_is_object(o)) {
        *st = perr(c, name, o ? "want an object" : "missing");
        return NULL;
    }
    *st = only_keys(c, o, name, keys);
    return *st ? NULL : o;
}

/* A number lo < v <= hi (lo_closed: lo <= v). */
static rkv_status num(const pctx *c, json_t *o, const char *sec, const char *key, double lo,
                      bool lo_closed, double hi, double *out)
{
    char f[96], want[96];
    snprintf(f, sizeof f, "%s.%s", sec, key);
    json_t *v = json_object_get(o, key);
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(lo_closed ? x >= lo : x > lo) || !(x <= hi)) {
        snprintf(want, sizeof want, "%s a number in %c%g, %g]", v ? "want" : "missing:",
                 lo_closed ? '[' : '(', lo, hi);
        return perr(c, f, want);
    }
    *out = x;
    return RKV_OK;
}

static rkv_status integer(const pctx *c, json_t *o, const char *sec, const char *key, int lo,
                          int hi, int *out)
{
    char f[96], want[96];
    snprintf(f, sizeof f, "%s.%s", sec, key);
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        snprintf(want, sizeof want, "%s an integer in [%d, %d]", v ? "want" : "missing:", lo, hi);
        return perr(c, f, want);
    }
    *out = (int)json_integer_value(v);
    return RKV_OK;
}

/* One of names (NULL-terminated); its index in *out. */
static rkv_status choice(const pctx *c, json_t *o, const char *sec, const char *key,
                         const char *const *names, int *out)
{
    char f[96], want[160];
    snprintf(f, sizeof f, "%s.%s", sec, key);
    const char *s = json_string_value(json_object_get(o, key));
    for (int i = 0; s && names[i]; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return RKV_OK;
        }
    size_t n = (size_t)snprintf(want, sizeof want, "%s one of", s ? "want" : "missing or not a string:");
    for (int i = 0; names[i] && n < sizeof want; i++)
        n += (size_t)snprintf(want + n, sizeof want - n, "%s %s", i ? "," : "", names[i]);
    return perr(c, f, want);
}

/* "tables": {"gemm": [{"name", "N", "K", "M": [..], "s": [..]}, ...]} */
static rkv_status gemm_tables_parse(const pctx *c, json_t *tables, sim_profile *out)
{
    static const char *const tab_k[] = {"gemm", NULL};
    static const char *const row_k[] = {"name", "N", "K", "M", "s", NULL};
    if (!json_is_object(tables)) return perr(c, "tables", "want an object");
    rkv_status st = only_keys(c, tables, "tables", tab_k);
    json_t *rows = json_object_get(tables, "gemm");
    if (st || !rows) return st;
    if (!json_is_array(rows) || json_array_size(rows) > SIM_GEMM_TABLES) {
        char want[64];
        snprintf(want, sizeof want, "want an array of at most %d tables", SIM_GEMM_TABLES);
        return perr(c, "tables.gemm", want);
    }
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        char sec[48], f[96];
        snprintf(sec, sizeof sec, "tables.gemm[%zu]", i);
        if (!json_is_object(row)) return perr(c, sec, "want an object");
        if ((st = only_keys(c, row, sec, row_k))) return st;
        sim_gemm_table *t = &out->gemm_table[i];
        if ((st = num(c, row, sec, "N", 0, false, 1e9, &t->n)) ||
            (st = num(c, row, sec, "K", 0, false, 1e9, &t->k)))
            return st;
        json_t *ms = json_object_get(row, "M"), *ss = json_object_get(row, "s");
        size_t n = json_array_size(ms);
        if (!json_is_array(ms) || n < 1 || n > SIM_GEMM_POINTS) {
            snprintf(f, sizeof f, "%s.M", sec);
            return perr(c, f, "want an array of 1 to 32 row counts");
        }
        if (!json_is_array(ss) || json_array_size(ss) != n) {
            snprintf(f, sizeof f, "%s.s", sec);
            return perr(c, f, "want an array of seconds, one per M");
        }
        for (size_t j = 0; j < n; j++) {
            double m = json_number_value(json_array_get(ms, j));
            double x = json_number_value(json_array_get(ss, j));
            if (!json_is_number(json_array_get(ms, j)) || !(m >= 1) ||
                (j > 0 && !(m > t->m[j - 1]))) {
                snprintf(f, sizeof f, "%s.M[%zu]", sec, j);
                return perr(c, f, "want row counts >= 1, strictly ascending");
            }
            if (!json_is_number(json_array_get(ss, j)) || !(x > 0) || !(x <= 10)) {
                snprintf(f, sizeof f, "%s.s[%zu]", sec, j);
                return perr(c, f, "want a time in (0, 10] seconds");
            }
            t->m[j] = m;
            t->s[j] = x;
        }
        t->points = (int)n;
        /* Two rows of one shape would leave which one a GEMM uses to the
         * order of the file: refused. */
        for (size_t j = 0; j < i; j++)
            if (out->gemm_table[j].n == t->n && out->gemm_table[j].k == t->k) {
                char what[96];
                snprintf(what, sizeof what, "N=%g, K=%g repeats tables.gemm[%zu]", t->n, t->k, j);
                return perr(c, sec, what);
            }
    }
    out->gemm_tables = (int)json_array_size(rows);
    return RKV_OK;
}

static const char *const graph_modes[] = {"none", "decode", "mixed", NULL};
static const char *const decode_row_modes[] = {"decode", "full_tile", NULL};

/* Parse the profile text (len bytes) named `where` into out. */
/* The profile's schema, id, summary and engine. */
static rkv_status check_header(pctx *c, json_t *root, sim_profile *out)
{
    json_t *v = json_object_get(root, "schema");
    if (!json_is_integer(v) || json_integer_value(v) != 1)
        return perr(c, "schema", "want 1 (the only version this binary reads)");
    const char *id = json_string_value(json_object_get(root, "id"));
    bool ctl = false; /* a control character would split a summary line */
    for (const char *p = id; p && *p; p++) ctl |= (unsigned char)*p < 0x20 || *p == 0x7f;
    if (!id || !*id || strlen(id) > 63 || strchr(id, ',') || strchr(id, '"') ||
        strchr(id, '\\') || ctl)
        return perr(c, "id", "want a non-empty string of at most 63 printable characters"
                    " without , \" or \\");
    snprintf(out->id, sizeof out->id, "%s", id);
    if (!json_is_string(json_object_get(root, "summary")))
        return perr(c, "summary", "want a string");
    /* Whose kernels the numbers describe (radixkv's own, or a peer's): part
     * of what a modelled number is a measurement of. */
    const char *eng = json_string_value(json_object_get(root, "engine"));
    if (!eng || !*eng) return perr(c, "engine", "want a non-empty string (the engine measured)");
    return RKV_OK;
}

/* A profile is only as good as where its numbers came from: the device
 * measured, when, and the measurements (the raw file, or a source in words
 * for constants taken from elsewhere). */
static rkv_status check_provenance(pctx *c, json_t *root)
{
    json_t *prov = json_object_get(root, "provenance");
    if (!json_is_object(prov))
        return perr(c, "provenance", "want an object (device, versions, date, raw file and hash)");
    static const char *const prov_need[] = {"device", "date", NULL};
    for (int i = 0; prov_need[i]; i++) {
        const char *v = json_string_value(json_object_get(prov, prov_need[i]));
        if (!v || !*v) {
            char f[48];
            snprintf(f, sizeof f, "provenance.%s", prov_need[i]);
            return perr(c, f, json_object_get(prov, prov_need[i]) ? "want a non-empty string"
                                                                  : "missing (a non-empty string)");
        }
    }
    const char *raw = json_string_value(json_object_get(prov, "raw"));
    const char *src = json_string_value(json_object_get(prov, "source"));
    if (!(raw && *raw) && !(src && *src))
        return perr(c, "provenance.raw", "missing: want the raw measurements' file, or "
                    "provenance.source saying where the numbers come from");
    return RKV_OK;
}

static rkv_status profile_from_text(const char *where, const unsigned char *text, size_t len,
                                    sim_profile *out, char *err, size_t errlen)
{
    pctx c = {where, err, errlen};
    json_error_t je;
    json_t *root = json_loadb((const char *)text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "sim profile %s: line %d: %s", where, je.line, je.text);
        return RKV_EINVAL;
    }
    memset(out, 0, sizeof *out);
    static const char *const top[] = {"schema", "id", "engine", "summary", "device",
        "efficiency", "latency", "host", "switches", "tables", "assumptions", "provenance", "fit",
        NULL};
    static const char *const dev_k[] = {"name", "peak_flops", "bandwidth", "memory_bytes", "sms", NULL};
    static const char *const eff_k[] = {"gemm", "weight", "attn", "kv", "act", NULL};
    static const char *const lat_k[] = {"gemm_s", "kernel_s", "launch_s", NULL};
    static const char *const host_k[] = {"step_s", "hidden_by_overlap", NULL};
    static const char *const sw_k[] = {"mixed_decode_rows", "graphs", "mixed_graph_rows",
        "act_dtype", "act_bytes_per_row", "small_kernels_per_layer", "step_kernels",
        "gemms_per_layer", "step_gemms", NULL};
    static const char *const act_k[] = {"hidden", "qkv", "kv", "ffn", NULL};
    rkv_status st = json_is_object(root) ? only_keys(&c, root, "", top) : perr(&c, "(top)", "want an object");
    json_t *dev = NULL, *eff = NULL, *lat = NULL, *host = NULL, *sw = NULL, *act = NULL;
    if (!st) st = check_header(&c, root, out);
    if (!st) dev = section(&c, root, "device", dev_k, &st);
    if (!st) eff = section(&c, root, "efficiency", eff_k, &st);
    if (!st) lat = section(&c, root, "latency", lat_k, &st);
    if (!st) host = section(&c, root, "host", host_k, &st);
    if (!st) sw = section(&c, root, "switches", sw_k, &st);
    if (!st) act = section(&c, sw, "act_bytes_per_row", act_k, &st);
    if (st) goto out;
    if ((st = check_provenance(&c, root))) goto out;
    int gm = 0, dm = 0;
    if ((st = num(&c, dev, "device", "peak_flops", 0, false, 1e18, &out->peak_flops)) ||
        (st = num(&c, dev, "device", "bandwidth", 0, false, 1e15, &out->bandwidth)) ||
        (st = num(&c, dev, "device", "memory_bytes", 0, false, 1e15, &out->memory_bytes)) ||
        (st = integer(&c, dev, "device", "sms", 1, 1 << 16, &out->sms)) ||
        (st = num(&c, eff, "efficiency", "gemm", 0, false, 1, &out->eff_gemm)) ||
        (st = num(&c, eff, "efficiency", "weight", 0, false, 1, &out->eff_weight)) ||
        (st = num(&c, eff, "efficiency", "attn", 0, false, 1, &out->eff_attn)) ||
        (st = num(&c, eff, "efficiency", "kv", 0, false, 1, &out->eff_kv)) ||
        (st = num(&c, eff, "efficiency", "act", 0, false, 1, &out->eff_act)) ||
        (st = num(&c, lat, "latency", "gemm_s", 0, true, 1, &out->gemm_latency_s)) ||
        (st = num(&c, lat, "latency", "kernel_s", 0, true, 1, &out->kernel_s)) ||
        (st = num(&c, lat, "latency", "launch_s", 0, true, 1, &out->launch_s)) ||
        (st = num(&c, host, "host", "step_s", 0, true, 10, &out->overhead_s)) ||
        (st = choice(&c, sw, "switches", "graphs", graph_modes, &gm)) ||
        (st = integer(&c, sw, "switches", "mixed_graph_rows", 0, 1 << 30, &out->mixed_graph_rows)) ||
        (st = choice(&c, sw, "switches", "mixed_decode_rows", decode_row_modes, &dm)) ||
        (st = integer(&c, sw, "switches", "small_kernels_per_layer", 0, 1000, &out->small_kernels_per_layer)) ||
        (st = integer(&c, sw, "switches", "step_kernels", 0, 1000, &out->step_kernels)) ||
        (st = integer(&c, sw, "switches", "gemms_per_layer", 0, 1000, &out->gemms_per_layer)) ||
        (st = integer(&c, sw, "switches", "step_gemms", 0, 1000, &out->step_gemms)) ||
        (st = num(&c, act, "switches.act_bytes_per_row", "hidden", 0, true, 1e4, &out->act_bytes[0])) ||
        (st = num(&c, act, "switches.act_bytes_per_row", "qkv", 0, true, 1e4, &out->act_bytes[1])) ||
        (st = num(&c, act, "switches.act_bytes_per_row", "kv", 0, true, 1e4, &out->act_bytes[2])) ||
        (st = num(&c, act, "switches.act_bytes_per_row", "ffn", 0, true, 1e4, &out->act_bytes[3])))
        goto out;
    out->graphs = gm;
    out->decode_rows_full_tile = dm == 1;
    if (!json_is_string(json_object_get(sw, "act_dtype"))) {
        st = perr(&c, "switches.act_dtype", "want a string (what act_bytes_per_row assumes)");
        goto out;
    }
    json_t *hid = json_object_get(host, "hidden_by_overlap");
    if (!json_is_boolean(hid)) {
        st = perr(&c, "host.hidden_by_overlap", "want true or false");
        goto out;
    }
    if (json_is_true(hid)) {
        /* The engine's overlap clock hides the scheduler's measured CPU time
         * only; a host time it cannot place must not be dropped silently. */
        st = perr(&c, "host.hidden_by_overlap",
                  "true is not modelled (overlap hides only the scheduler's CPU time); use false");
        goto out;
    }
    json_t *tables = json_object_get(root, "tables");
    if (tables && (st = gemm_tables_parse(&c, tables, out))) goto out;
    /* First 16 hex digits of the SHA-256 of the file's bytes: what
     * `sha256sum FILE | cut -c1-16` prints. */
    unsigned char md[32];
    unsigned int mdlen = 0;
    if (!EVP_Digest(text, len, md, &mdlen, EVP_sha256(), NULL) || mdlen < 8) {
        snprintf(err, errlen, "sim profile %s: SHA-256 failed", where);
        st = RKV_EINVAL;
        goto out;
    }
    for (int i = 0; i < 8; i++) snprintf(out->hash + 2 * i, 3, "%02x", md[i]);
out:
    json_decref(root);
    return st;
}

rkv_status sim_profile_load_file(const char *path, sim_profile *out, char *err, size_t errlen)
{
    /* A profile is a few KiB of JSON: a file over 64 MiB is refused. */
    char *buf, why[512];
    size_t len;
    rkv_status st = rkv_read_file(path, (size_t)1 << 26, &buf, &len, why, sizeof why);
    if (st) {
        snprintf(err, errlen, "sim profile %s", why);
        return st == RKV_ENOMEM ? RKV_ENOMEM : RKV_EINVAL;
    }
    st = profile_from_text(path, (const unsigned char *)buf, len, out, err, errlen);
    free(buf);
    return st;
}

const char *sim_profile_summary(const char *id)
{
    static char line[256];
    for (int i = 0; sim_profile_ids[i]; i++) {
        if (strcmp(sim_profile_ids[i], id)) continue;
        json_t *root = json_loadb((const char *)sim_profile_texts[i], sim_profile_lens[i], 0, NULL);
        snprintf(line, sizeof line, "%s", root ? json_string_value(json_object_get(root, "summary")) : "?");
        json_decref(root);
        return line;
    }
    return NULL;
}

/* ---- overrides ------------------------------------------------------------ */

typedef struct sim_key {
    const char *key;
    size_t off;
    double scale, lo, hi; /* value * scale, accepted when lo < value <= hi */
} sim_key;

static const sim_key keys[] = {
    {"eff", offsetof(sim_profile, eff_gemm), 1, 0, 1},
    {"mem_eff", offsetof(sim_profile, eff_weight), 1, 0, 1},
    {"attn_eff", offsetof(sim_profile, eff_attn), 1, 0, 1},
    {"kv_eff", offsetof(sim_profile, eff_kv), 1, 0, 1},
    {"act_eff", offsetof(sim_profile, eff_act), 1, 0, 1},
    {"gemm_us", offsetof(sim_profile, gemm_latency_s), 1e-6, -1, 1e6},
    {"kernel_us", offsetof(sim_profile, kernel_s), 1e-6, -1, 1e6},
    {"launch_us", offsetof(sim_profile, launch_s), 1e-6, -1, 1e6},
    {"overhead_ms", offsetof(sim_profile, overhead_s), 1e-3, -1, 1e6},
};

rkv_status sim_profile_parse(const char *spec, sim_profile *out, char *err, size_t errlen)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "h100");
    char *save = NULL;
    char *name = strtok_r(buf, ",", &save);
    if (!name) name = "h100";
    size_t i = 0;
    while (sim_profile_ids[i] && strcmp(sim_profile_ids[i], name)) i++;
    if (!sim_profile_ids[i]) {
        char known[256];
        size_t n = 0;
        known[0] = 0;
        for (size_t j = 0; sim_profile_ids[j] && n < sizeof known; j++)
            n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", j ? ", " : "", sim_profile_ids[j]);
        snprintf(err, errlen, "sim: unknown GPU profile '%s' (known: %s; or --sim-profile FILE)",
                 name, known);
        return RKV_EINVAL;
    }
    rkv_status st = profile_from_text(name, sim_profile_texts[i], sim_profile_lens[i], out, err, errlen);
    if (st) return st;
    for (char *kv = strtok_r(NULL, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        char *end = NULL;
        double v = eq ? strtod(eq + 1, &end) : NAN;
        if (!eq || end == eq + 1 || *end) {
            snprintf(err, errlen, "sim: bad GPU profile override '%s' (want key=number)", kv);
            return RKV_EINVAL;
        }
        *eq = 0;
        size_t k = 0;
        for (; k < sizeof keys / sizeof keys[0]; k++)
            if (!strcmp(kv, keys[k].key)) break;
        if (k < sizeof keys / sizeof keys[0] && v >= 0 && v > keys[k].lo && v <= keys[k].hi) {
            *(double *)((char *)out + keys[k].off) = v * keys[k].scale;
        } else if (!strcmp(kv, "graphs") && (v == 0 || v == 1 || v == 2)) {
            out->graphs = (int)v;
        } else {
            snprintf(err, errlen,
                     "sim: bad GPU profile override '%s=%s' (eff, mem_eff, attn_eff, kv_eff, "
                     "act_eff in (0,1]; gemm_us, kernel_us, launch_us, overhead_ms in [0, 1e6]; "
                     "graphs 0|1|2)",
                     kv, eq + 1);
            return RKV_EINVAL;
        }
    }
    /* The id a run reports names the overrides too: the hash is the file's. */
    if (spec && strchr(spec, ',')) snprintf(out->id, sizeof out->id, "%s", spec);
    return RKV_OK;
}

/* One GEMM y (M, N) = x (M, K) w (N, K)^T: the profile's measured table for
 * this (N, K) when it has one (interpolated as backend_sim.h says); else
 * compute-bound at large M, or a fixed latency plus streaming the bf16 weights. */
static double gemm_seconds(const sim_profile *p, double M, double N, double K)
{
    for (int i = 0; i < p->gemm_tables; i++) {
        const sim_gemm_table *t = &p->gemm_table[i];
        if (t->n != N || t->k != K) continue;
        int last = t->points - 1;
        if (M <= t->m[0]) return t->s[0];
        if (M >= t->m[last]) return t->s[last] * M / t->m[last];
        int j = 1;
        while (t->m[j] < M) j++;
        return t->s[j - 1] + (t->s[j] - t->s[j - 1]) * (M - t->m[j - 1]) / (t->m[j] - t->m[j - 1]);
    }
    double tc = 2 * M * N * K / (p->peak_flops * p->eff_gemm);
    double tw = p->gemm_latency_s + 2 * N * K / (p->bandwidth * p->eff_weight);
    return tc > tw ? tc : tw;
}

/* Activation bytes per row per layer of the small kernels around the GEMMs,
 * with the profile's coefficients. radixkv's cuda backend (fp32 residual
 * stream and GEMM outputs, bf16 GEMM inputs) has 28, 6, 8, 10:
 *   2 x add+RMSNorm   read resid, proj (fp32), write resid (fp32), normed (bf16): 2 x 14 C
 *   bias+RoPE         read qkv (fp32), write q, k, v (bf16):                  6 (qd + 2 kvd)
 *   store K/V         read k, v, write them into pages (bf16):                8 kvd
 *   SwiGLU            read gate, up (fp32), write act (bf16):                 10 F */
static double act_bytes_per_row(const model_config *m, const sim_profile *p)
{
    double C = m->hidden_size, F = m->intermediate_size;
    double qd = (double)m->num_heads * m->head_dim, kvd = (double)m->num_kv_heads * m->head_dim;
    return p->act_bytes[0] * C + p->act_bytes[1] * (qd + 2 * kvd) + p->act_bytes[2] * kvd +
           p->act_bytes[3] * F;
}

void sim_step_terms(const model_config *m, const sim_profile *p, const fwd_batch *b,
                    sim_step_parts *out)
{
    double C = m->hidden_size, F = m->intermediate_size, V = m->vocab_size, L = m->num_layers;
    double qd = (double)m->num_heads * m->head_dim, kvd = (double)m->num_kv_heads * m->head_dim;
    double T = b->num_tokens, B = b->num_seqs, pairs = 0, ctx = 0, tiles = 0;
    int32_t max_s = 0;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        int32_t s = b->q_starts[i + 1] - b->q_starts[i];
        if (s > max_s) max_s = s;
    }
    const bool decode = max_s <= 1;
    /* The prefill kernel's row tile: 128 rows, 64 when no suffix is longer. */
    const double bm = max_s > 64 ? 128 : 64;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        double s = b->q_starts[i + 1] - b->q_starts[i], pre = b->prefix_lens[i];
        ctx += pre + s;
        /* A decode row beside prompt rows: radixkv's prefill kernel gives it
         * a whole tile; engines that send decode rows to a decode kernel (or
         * size the tile by the rows present) pay only its K/V read, which
         * the bandwidth term below already holds. */
        if (!decode && s <= 1 && !p->decode_rows_full_tile) continue;
        double nt = ceil(s / bm);
        /* Query-key pairs the prefill kernel computes: whole row tiles, each
         * over the keys up to its last row (bm rows even when the sequence
         * has one: a decode row among prompt rows costs a full tile). */
        pairs += bm * (nt * pre + bm * nt * (nt - 1) / 2 + s);
        tiles += nt;
    }

    /* GEMMs of one layer (qkv, o, gate_up, down) and the LM head over the
     * step's sequences (the backend runs it on one row per sequence). */
    double t_gemm = L * (gemm_seconds(p, T, qd + 2 * kvd, C) + gemm_seconds(p, T, C, qd) +
                         gemm_seconds(p, T, 2 * F, C) + gemm_seconds(p, T, C, F));
    if (B > 0) t_gemm += gemm_seconds(p, B, V, C);

    /* Attention, one kernel per layer: reads each sequence's K/V once (decode
     * kernel: bandwidth-bound); the prefill kernel is also bound by its
     * tensor-core rate, scaled by the share of SMs its (head, row tile) CTAs fill. */
    double kv_layer = (double)model_config_kv_bytes_per_token(m, 2) / L;
    double t_attn = kv_layer * ctx / (p->bandwidth * p->eff_kv);
    if (!decode && pairs > 0) {
        double fill = m->num_heads * tiles / (double)p->sms;
        double tc = 4.0 * qd * pairs / (p->peak_flops * p->eff_attn * (fill < 1 ? fill : 1));
        if (tc > t_attn) t_attn = tc;
    }
    t_attn *= L;

    double t_act = L * T * act_bytes_per_row(m, p) / (p->bandwidth * p->eff_act);
    double kernels = p->small_kernels_per_layer * L + p->step_kernels;
    bool graph = (p->graphs >= 1 && decode) || (p->graphs >= 2 && T <= p->mixed_graph_rows);
    double t_launch = kernels * p->kernel_s;
    if (!graph) t_launch += (kernels + p->gemms_per_layer * L + p->step_gemms) * p->launch_s;
    *out = (sim_step_parts){t_gemm, t_attn, t_act, t_launch, p->overhead_s};
}

double sim_step_seconds(const model_config *m, const sim_profile *p, const fwd_batch *b)
{
    sim_step_parts t;
    sim_step_terms(m, p, b, &t);
    return t.gemm + t.attn + t.act + t.kernels + t.host;
}

static rkv_status sim_forward(backend *bb, const fwd_batch *b, int32_t *out_tokens,
                              float *out_logits, double *step_seconds)
{
    sim_backend *sb = (sim_backend *)bb;
    const int32_t P = bb->page_size, V = bb->vocab_size;
    const int64_t nslots = bb->num_pages * P;
    if (b->num_seqs < 0 || b->q_starts[0] != 0 || b->q_starts[b->num_seqs] != b->num_tokens)
        return RKV_EINVAL;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        int32_t q0 = b->q_starts[i], q1 = b->q_starts[i + 1], pre = b->prefix_lens[i];
        if (q1 < q0 || pre < 0 || pre + (q1 - q0) > bb->max_context) return RKV_EINVAL;
        const int32_t *pt = b->page_table + (size_t)i * b->max_pages;
        if ((pre + (q1 - q0) + P - 1) / P > b->max_pages) return RKV_EINVAL;
        /* A stable decode step's page table is the one checked last step
         * and maybe the new row's page (fwd_batch.same_pages): only the
         * pages of this step's rows are checked. The walk over every page
         * of every sequence was most of a long-context decode step's cost. */
        for (int32_t k = b->same_pages ? pre / P : 0;
             k < (pre + (q1 - q0) + P - 1) / P; k++)
            if (pt[k] < 0 || pt[k] >= bb->num_pages) return RKV_EINVAL;
        /* The context so far: the hash stored at the last prefix slot. */
        uint64_t h = 0x243f6a8885a308d3ull;
        if (pre > 0) {
            int64_t slot = (int64_t)pt[(pre - 1) / P] * P + (pre - 1) % P;
            if (sb->slot_pos[slot] != pre) return RKV_ECORRUPT;
            h = sb->slot_hash[slot];
        }
        for (int32_t r = q0; r < q1; r++) {
            int32_t pos = pre + (r - q0);
            int32_t tok = b->token_ids[r];
            int64_t slot = (int64_t)pt[pos / P] * P + pos % P;
            if (tok < 0 || tok >= V || b->positions[r] != pos || b->slot_mapping[r] != slot ||
                slot >= nslots)
                return RKV_EINVAL;
            h = rkv_splitmix64(h ^ rkv_splitmix64((uint64_t)tok + 0x100000000ull * (uint64_t)(pos + 1)));
            sb->slot_hash[slot] = h;
            sb->slot_pos[slot] = pos + 1;
            if (b->sample_rows[i] == r) {
                const sampling_params *sp = &b->sampling[i];
                uint64_t x = h;
                if (sp->temperature > 0)
                    x = rkv_splitmix64(x ^ rkv_splitmix64(sp->seed) ^ (uint64_t)b->sample_steps[i] * 0xd1b54a32d192ed03ull);
                out_tokens[i] = (int32_t)(rkv_splitmix64(x) % (uint64_t)V);
                if (out_logits) {
                    float *row = out_logits + (size_t)i * V;
                    for (int32_t v = 0; v < V; v++) row[v] = 0.0f;
                    row[out_tokens[i]] = 1.0f;
                }
            }
        }
        if (b->sample_rows[i] >= 0 && (b->sample_rows[i] < q0 || b->sample_rows[i] >= q1))
            return RKV_EINVAL;
    }
    if (step_seconds) *step_seconds = sim_step_seconds(&sb->model, &sb->prof, b);
    return RKV_OK;
}

static void sim_destroy(backend *bb)
{
    sim_backend *sb = (sim_backend *)bb;
    free(sb->slot_hash);
    free(sb->slot_pos);
    free(sb);
}

/* A page's "K/V" here is its slots' chained hashes and positions, so a spill
 * tier moves them like real K/V: a page loaded back into another page id
 * must carry them or the next step fails its prefix check. */
static rkv_status sim_page_bytes(backend *bb, size_t *bytes)
{
    *bytes = (size_t)bb->page_size * (sizeof(uint64_t) + sizeof(int32_t));
    return RKV_OK;
}

static rkv_status sim_read_page(backend *bb, int32_t page, void *dst)
{
    sim_backend *sb = (sim_backend *)bb;
    if (page < 0 || page >= bb->num_pages) return RKV_EINVAL;
    size_t P = (size_t)bb->page_size, off = (size_t)page * P;
    memcpy(dst, sb->slot_hash + off, P * sizeof(uint64_t));
    memcpy((uint8_t *)dst + P * sizeof(uint64_t), sb->slot_pos + off, P * sizeof(int32_t));
    return RKV_OK;
}

static rkv_status sim_write_page(backend *bb, int32_t page, const void *src)
{
    sim_backend *sb = (sim_backend *)bb;
    if (page < 0 || page >= bb->num_pages) return RKV_EINVAL;
    size_t P = (size_t)bb->page_size, off = (size_t)page * P;
    memcpy(sb->slot_hash + off, src, P * sizeof(uint64_t));
    memcpy(sb->slot_pos + off, (const uint8_t *)src + P * sizeof(uint64_t), P * sizeof(int32_t));
    return RKV_OK;
}

static const backend_ops sim_ops = {
    .name = "sim",
    .forward = sim_forward,
    .page_bytes = sim_page_bytes,
    .read_page = sim_read_page,
    .write_page = sim_write_page,
    .destroy = sim_destroy,
    .caps = BACKEND_CAP_MODELLED_TIME,
};

const sim_profile *backend_sim_profile(const backend *b)
{
    return b && b->ops == &sim_ops ? &((const sim_backend *)b)->prof : NULL;
}

rkv_status backend_sim_create(const backend_config *cfg, backend **out, char *err, size_t errlen)
{
    *out = NULL;
    sim_backend *sb = calloc(1, sizeof *sb);
    if (!sb) return RKV_ENOMEM;
    rkv_status st = model_config_load(cfg->model, &sb->model, err, errlen);
    if (st == RKV_OK && cfg->sim_profile_file && cfg->gpu_profile) {
        snprintf(err, errlen, "sim: a GPU profile (%s) and a profile file (%s) given; pick one",
                 cfg->gpu_profile, cfg->sim_profile_file);
        st = RKV_EINVAL;
    } else if (st == RKV_OK) {
        st = cfg->sim_profile_file
                 ? sim_profile_load_file(cfg->sim_profile_file, &sb->prof, err, errlen)
                 : sim_profile_parse(cfg->gpu_profile, &sb->prof, err, errlen);
    }
    if (st) {
        free(sb);
        return st;
    }
    if (cfg->page_size < 1) {
        snprintf(err, errlen, "sim: page size %d must be >= 1", cfg->page_size);
        free(sb);
        return RKV_EINVAL;
    }
    int64_t num_pages = cfg->num_pages;
    double weights = 2.0 * (double)model_config_num_params(&sb->model);
    double page_bytes = (double)model_config_kv_bytes_per_token(&sb->model, 2) * cfg->page_size;
    if (num_pages <= 0) {
        /* What the GPU's memory holds beside the bf16 weights. */
        double frac = cfg->mem_fraction > 0 && cfg->mem_fraction <= 1 ? cfg->mem_fraction : 0.9;
        double room = sb->prof.memory_bytes * frac - weights;
        num_pages = room > 0 ? (int64_t)(room / page_bytes) : 0;
        if (num_pages > INT32_MAX / cfg->page_size) num_pages = INT32_MAX / cfg->page_size;
        if (num_pages < 1) {
            snprintf(err, errlen, "sim: %s weights (%.1f GB) leave no KV memory on %s",
                     sb->model.name, weights / 1e9, sb->prof.id);
            free(sb);
            return RKV_ENOSPC;
        }
    }
    if (num_pages > INT32_MAX / cfg->page_size) {
        snprintf(err, errlen, "sim: %lld pages of %d tokens is too many", (long long)num_pages,
                 cfg->page_size);
        free(sb);
        return RKV_EINVAL;
    }
    size_t nslots = (size_t)num_pages * (size_t)cfg->page_size;
    sb->slot_hash = calloc(nslots, sizeof(uint64_t));
    sb->slot_pos = calloc(nslots, sizeof(int32_t));
    if (!sb->slot_hash || !sb->slot_pos) {
        sim_destroy(&sb->base);
        return RKV_ENOMEM;
    }
    sb->base.ops = &sim_ops;
    sb->base.vocab_size = sb->model.vocab_size;
    sb->base.page_size = cfg->page_size;
    sb->base.num_pages = num_pages;
    sb->base.max_context = sb->model.max_position;
    snprintf(sb->base.description, sizeof sb->base.description,
             "sim %.64s: %s, %lld pages x %d tokens", sb->prof.id, sb->model.name,
             (long long)num_pages, cfg->page_size);
    *out = &sb->base;
    return RKV_OK;
}
