/* test_policy_contract.c - the eviction-policy contract (evict_policy.h):
 * no registered policy's key falls when a node is accessed, and the check
 * does catch a policy that breaks it (most recently used first). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_run.h"
#include "evict_policy.h"

START_TEST(every_registered_policy_keeps_the_contract)
{
    ck_assert_int_gt(evict_policy_count(), 0);
    for (int i = 0; evict_policies[i]; i++) {
        char err[256] = "";
        ck_assert_msg(evict_policy_key_never_falls(evict_policies[i], 200000, 7 + (uint64_t)i, err,
                                                   sizeof err),
                      "%s", err);
    }
}
END_TEST

/* MRU: the newest access goes first, so its key falls on every access. */
static evict_key mru_key(const evict_node *n) { return (evict_key){~n->time, 0}; }

START_TEST(a_key_that_falls_on_access_is_caught)
{
    const evict_policy mru = {.name = "mru", .summary = "most recently used first", .key = mru_key};
    char err[256] = "";
    ck_assert(!evict_policy_key_never_falls(&mru, 1000, 1, err, sizeof err));
    ck_assert_msg(strstr(err, "policy mru: key fell on access") != NULL, "%s", err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("policy_contract");
    TCase *tc = tcase_create("contract");
    tcase_add_test(tc, every_registered_policy_keeps_the_contract);
    tcase_add_test(tc, a_key_that_falls_on_access_is_caught);
    suite_add_tcase(s, tc);
    return check_run(s);
}
