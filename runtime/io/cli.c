/* cli.c - see cli.h. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int refuse(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return 2;
}

int cli_parse_int(const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out,
                  char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi)
        return refuse(err, errlen, "%s: expected an integer in [%" PRId64 ", %" PRId64 "], got '%s'",
                      opt, lo, hi, v ? v : "");
    *out = x;
    return 0;
}

int cli_parse_double(const char *opt, const char *v, double lo, double hi, double *out,
                     char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end || !(x >= lo && x <= hi))
        return refuse(err, errlen, "%s: expected a number in [%g, %g], got '%s'", opt, lo, hi,
                      v ? v : "");
    *out = x;
    return 0;
}

static int parse_choice(const cli_opt *o, const char *v, char *err, size_t errlen)
{
    for (int i = 0; o->choices[i]; i++)
        if (!strcmp(v, o->choices[i])) {
            *(const char **)o->dst = o->choices[i];
            return 0;
        }
    size_t used = (size_t)snprintf(err, errlen, "%s: unknown value '%s' (one of:", o->name, v);
    for (int i = 0; o->choices[i] && used < errlen; i++)
        used += (size_t)snprintf(err + used, errlen - used, " %s", o->choices[i]);
    if (used < errlen) snprintf(err + used, errlen - used, ")");
    return 2;
}

static int set_value(cli_opt *o, const char *v, char *err, size_t errlen)
{
    switch (o->kind) {
    case CLI_STR: *(const char **)o->dst = v; return 0;
    case CLI_INT: return cli_parse_int(o->name, v, o->lo, o->hi, (int64_t *)o->dst, err, errlen);
    case CLI_DOUBLE:
        return cli_parse_double(o->name, v, o->dlo, o->dhi, (double *)o->dst, err, errlen);
    case CLI_CHOICE: return parse_choice(o, v, err, errlen);
    case CLI_CUSTOM: return o->parse(o->ctx, o->name, v, err, errlen) ? 2 : 0;
    default: return refuse(err, errlen, "%s: not a value option", o->name);
    }
}

int cli_parse(const char *prog, cli_opt *opts, int argc, char **argv, cli_args *a, char *err,
              size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (err && errlen) err[0] = '\0';
    for (cli_opt *o = opts; o->name; o++) o->seen = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            a->help = true;
            return 0;
        }
        if (strncmp(arg, "--", 2) || !arg[2]) {
            if (a->npos == CLI_MAX_POSITIONALS)
                return refuse(err, errlen, "too many arguments ('%s')", arg);
            a->pos[a->npos++] = arg;
            continue;
        }
        /* 1: the name, and a value after '=' if any. */
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        cli_opt *o = opts;
        while (o->name && (strlen(o->name) != len || strncmp(o->name, arg, len))) o++;
        if (!o->name)
            return refuse(err, errlen, "unknown option %.*s (see %s --help)", (int)len, arg, prog);
        /* 2: refusals that do not depend on the value. */
        if (o->kind == CLI_RENAMED)
            return refuse(err, errlen, "%s was renamed: use %s", o->name, o->renamed_to);
        if (o->seen && !o->repeat) return refuse(err, errlen, "%s given twice", o->name);
        o->seen = true;
        if (o->kind == CLI_FLAG) {
            if (eq) return refuse(err, errlen, "%s takes no value, got '%s'", o->name, eq + 1);
            *(bool *)o->dst = true;
            continue;
        }
        /* 3: the value. */
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) return refuse(err, errlen, "%s needs a value", o->name);
        int rc = set_value(o, v, err, errlen);
        if (rc) return rc;
    }
    return 0;
}

bool cli_given(const cli_opt *opts, const char *name)
{
    for (const cli_opt *o = opts; o->name; o++)
        if (!strcmp(o->name, name)) return o->seen;
    return false;
}

int cli_command(const char *cmd, cli_opt *opts, int argc, char **argv, cli_args *a,
                void (*usage)(FILE *f))
{
    char prog[64], err[512];
    snprintf(prog, sizeof prog, "radixkv %s", cmd);
    if (cli_parse(prog, opts, argc, argv, a, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 2;
    }
    if (!a->help) return -1;
    usage(stdout);
    return 0;
}

void cli_usage_choices(FILE *f, int width, const char *opt, const char *note,
                       const char *const *names)
{
    fprintf(f, "  %-*s %s", width, opt, note ? note : "");
    for (int i = 0; names[i]; i++) fprintf(f, i ? " | %s" : "%s (default)", names[i]);
    fputc('\n', f);
}
