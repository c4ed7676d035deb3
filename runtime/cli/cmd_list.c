/* cmd_list.c - `radixkv list [--json]`: what this binary offers, read from
 * the registries (cache kinds: cache_kinds.h; eviction policies:
 * evict_policy.h; hash functions: block_hash.h; backends: backend.h;
 * scheduling policies: scheduler.h; sim profiles: backend_sim.h). Experiments and notebooks read
 * `radixkv list --json` instead of keeping lists of their own.
 *
 * --json prints one JSON object on one line to stdout:
 *   {"kinds":[{"name","summary","reuses","evicts","hashes","tree","policies":[..],
 *              "hash_fns":[..]}],
 *    "policies":[{"name","summary","needs":[..]}], "hash_fns":[..],
 *    "backends":[{"name","built","summary"}], "sched_policies":[..],
 *    "sim_profiles":[{"name","hash","summary"}]}
 * A kind's "policies" are those that order its eviction (empty when it has no
 * order to choose); its "hash_fns" those it hashes with (empty if none).
 * Without --json the same lists go to stdout as text, for people (so that
 * `radixkv list | grep` works). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_sim.h"
#include "block_hash.h"
#include "cache_kinds.h"
#include "cli.h"
#include "commands.h"
#include "evict_policy.h"
#include "scheduler.h"

static json_t *names_json(const char *const *names)
{
    json_t *a = json_array();
    for (int i = 0; names[i]; i++) json_array_append_new(a, json_string(names[i]));
    return a;
}

static json_t *list_json(void)
{
    static const char *const none[] = {NULL};
    json_t *kinds = json_array();
    for (const cache_kind *k = cache_kinds; k->name; k++)
        json_array_append_new(kinds, json_pack("{s:s, s:s, s:b, s:b, s:b, s:b, s:o, s:o}",
            "name", k->name, "summary", k->summary,
            "reuses", (k->caps & CACHE_CAP_REUSE) != 0, "evicts", (k->caps & CACHE_CAP_EVICTS) != 0,
            "hashes", (k->caps & CACHE_CAP_HASHES) != 0, "tree", (k->caps & CACHE_CAP_TREE) != 0,
            "policies", names_json(k->caps & CACHE_CAP_EVICTS ? evict_policy_name_list : none),
            "hash_fns", names_json(k->caps & CACHE_CAP_HASHES ? block_hash_fn_names : none)));
    json_t *pols = json_array();
    for (int i = 0; evict_policies[i]; i++) {
        const evict_policy *p = evict_policies[i];
        json_t *needs = json_array();
        if (p->needs & EVICT_NEEDS_DEPTH) json_array_append_new(needs, json_string("depth"));
        if (p->needs & EVICT_NEEDS_PRIORITY) json_array_append_new(needs, json_string("priority"));
        if (p->needs & EVICT_NEEDS_HITS) json_array_append_new(needs, json_string("hits"));
        json_array_append_new(pols, json_pack("{s:s, s:s, s:o}", "name", p->name, "summary",
                                              p->summary, "needs", needs));
    }
    json_t *backends = json_array();
    for (int i = 0; backend_names[i]; i++)
        json_array_append_new(backends, json_pack("{s:s, s:b, s:s}", "name", backend_names[i], "built",
                                                  backend_built(backend_names[i]), "summary",
                                                  backend_summary(backend_names[i])));
    json_t *sched = json_array();
    for (int p = 0; sched_policy_names[p]; p++)
        json_array_append_new(sched, json_string(sched_policy_names[p]));
    json_t *profs = json_array();
    for (int i = 0; sim_profile_ids[i]; i++) {
        sim_profile sp;
        char err[256];
        bool ok = sim_profile_parse(sim_profile_ids[i], &sp, err, sizeof err) == RKV_OK;
        json_array_append_new(profs, json_pack("{s:s, s:s, s:s}", "name", sim_profile_ids[i],
            "hash", ok ? sp.hash : "?", "summary", ok ? sim_profile_summary(sim_profile_ids[i]) : err));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "kinds", kinds, "policies", pols, "hash_fns",
                     names_json(block_hash_fn_names), "backends", backends, "sched_policies", sched,
                     "sim_profiles", profs);
}

static void list_text(FILE *f, json_t *all)
{
    size_t i;
    json_t *v;
    fprintf(f, "cache kinds (--cache):\n");
    json_array_foreach(json_object_get(all, "kinds"), i, v)
        fprintf(f, "  %-14s %s%s\n", json_string_value(json_object_get(v, "name")),
                json_string_value(json_object_get(v, "summary")),
                json_is_true(json_object_get(v, "evicts")) ? " [every eviction policy]" : "");
    fprintf(f, "eviction policies (--evict-policy):\n");
    json_array_foreach(json_object_get(all, "policies"), i, v)
        fprintf(f, "  %-14s %s\n", json_string_value(json_object_get(v, "name")),
                json_string_value(json_object_get(v, "summary")));
    fprintf(f, "hash functions (--hash):");
    json_array_foreach(json_object_get(all, "hash_fns"), i, v) fprintf(f, " %s", json_string_value(v));
    fprintf(f, "\nbackends (--backend):\n");
    json_array_foreach(json_object_get(all, "backends"), i, v)
        fprintf(f, "  %-14s %s%s\n", json_string_value(json_object_get(v, "name")),
                json_string_value(json_object_get(v, "summary")),
                json_is_true(json_object_get(v, "built")) ? "" : " (not built into this binary)");
    fprintf(f, "scheduling policies (run --sched-policy):");
    json_array_foreach(json_object_get(all, "sched_policies"), i, v) fprintf(f, " %s", json_string_value(v));
    fprintf(f, "\nsim profiles (run --backend sim --gpu; or --sim-profile FILE):\n");
    json_array_foreach(json_object_get(all, "sim_profiles"), i, v)
        fprintf(f, "  %-14s %s  %s\n", json_string_value(json_object_get(v, "name")),
                json_string_value(json_object_get(v, "hash")),
                json_string_value(json_object_get(v, "summary")));
}

static void usage_list(FILE *f)
{
    fprintf(f, "usage: radixkv list [--json]\n\n"
               "Cache kinds, eviction policies, hash functions, backends, scheduling\n"
               "policies and sim profiles of this binary. --json: one JSON object on\n"
               "stdout; otherwise text on stdout.\n");
}

int cmd_list(int argc, char **argv)
{
    bool as_json = false;
    cli_opt opts[] = {
        CLI_FLAG_OPT("--json", &as_json),
        CLI_END,
    };
    cli_args a;
    int rc = cli_command("list", opts, argc, argv, &a, usage_list);
    if (rc >= 0) return rc;
    if (a.npos) {
        fprintf(stderr, "radixkv list: unexpected argument '%s' (see radixkv list --help)\n",
                a.pos[0]);
        return 2;
    }
    json_t *all = list_json();
    if (!all) {
        fprintf(stderr, "radixkv list: out of memory\n");
        return 1;
    }
    if (as_json) {
        char *s = json_dumps(all, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!s) {
            json_decref(all);
            fprintf(stderr, "radixkv list: out of memory\n");
            return 1;
        }
        printf("%s\n", s);
        free(s);
    } else {
        list_text(stdout, all);
    }
    json_decref(all);
    return 0;
}
