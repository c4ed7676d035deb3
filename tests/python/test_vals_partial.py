"""radixkv.Cache's kv_values and kv_evict read a path's set flags only while
some cached page may lack values (vals_partial in python/radixkv/_radixkv.c:
set by insert() without values and by a kv_insert that fails once the tree
has adopted its pages, cleared by reset). Each case below gives a wrong
answer if a route that leaves a page without values does not set it, or if
a failed kv_insert left pages behind: a value read from a page that never
took one, or an evict that hands back more values than were stored.

For kinds radix (one-walk int64 route), trie and hash (match, alloc,
insert), page sizes 1 and 4. Exit 1 naming the first difference.
"""
import array

import radixkv
from pychecks import check, count, raises


def q(xs):
    return array.array("q", xs)


def stored_and_evicted(c, model, what):
    """Every value the model holds comes back from kv_values on its key,
    and one kv_evict of everything hands back exactly those values."""
    for key, vals in model.items():
        got = list(c.kv_values(c.kv_match(q(key))))
        check(got == vals, f"{what}: kv_values of {key[:3]}..: {got[:4]} != {vals[:4]}")
    freed, ev = c.kv_evict(1 << 30)
    want = sorted(v for vals in model.values() for v in vals)
    check(freed == len(want) and sorted(ev) == want,
          f"{what}: kv_evict freed {freed}, values {sorted(ev)[:6]}.., stored {want[:6]}..")


def case(kind, P):
    what = f"{kind} P={P}"
    c = radixkv.Cache(kind, P, 64)
    a, b, d = [1] * (3 * P), [2] * (2 * P), [3] * (2 * P)
    # 1) values only: gathers and the evict take the route without flags.
    c.kv_insert(q(a), q(range(100, 100 + len(a))))
    c.kv_insert(q(d), q(range(500, 500 + len(d))))
    stored_and_evicted(c, {tuple(a): list(range(100, 100 + len(a))),
                           tuple(d): list(range(500, 500 + len(d)))}, f"{what}, values only")
    # 2) a page without values (insert): its path is refused, the others'
    # values still exact, and an evict that frees it refuses.
    c.kv_insert(q(a), q(range(200, 200 + len(a))))
    c.insert(b, c.alloc(len(b) // P))
    raises(ValueError, lambda: c.kv_values(c.kv_match(q(b))), f"{what}: path inserted without values")
    check(list(c.kv_values(c.kv_match(q(a)))) == list(range(200, 200 + len(a))),
          f"{what}: values beside a page without")
    raises(ValueError, lambda: c.kv_evict(1 << 30), f"{what}: evict of a page without values")
    # 3) reset: an empty tree, every page from here on takes values.
    c.reset()
    c.kv_insert(q(a), q(range(300, 300 + len(a))))
    stored_and_evicted(c, {tuple(a): list(range(300, 300 + len(a)))}, f"{what}, after reset")
    # 4) a kv_insert refused (an id out of range in the new part, then too
    # few free pages) adopts nothing: the values stored before are all that
    # a gather or an evict hands back.
    c.kv_insert(q(a), q(range(400, 400 + len(a))))
    bad = a + [2 ** 40] * P
    raises(ValueError, lambda: c.kv_insert(q(bad), q(range(len(bad)))), f"{what}: id out of range")
    big = [9] * (64 * P)
    raises(radixkv.Error, lambda: c.kv_insert(q(big), q(range(len(big)))), f"{what}: pool too small")
    stored_and_evicted(c, {tuple(a): list(range(400, 400 + len(a)))}, f"{what}, after refusals")
    # 5) an evict with a page without values is refused, and the pages it
    # freed forget their values: a later kv_insert on them is exact.
    c.insert(b, c.alloc(len(b) // P))
    c.kv_insert(q(a), q(range(600, 600 + len(a))))
    raises(ValueError, lambda: c.kv_evict(1 << 30), f"{what}: mixed evict")
    c.kv_insert(q(d), q(range(700, 700 + len(d))))
    stored_and_evicted(c, {tuple(d): list(range(700, 700 + len(d)))}, f"{what}, after a mixed evict")
    c.close()


def main():
    for kind in ("radix", "trie", "hash"):
        for P in (1, 4):
            case(kind, P)
    print(f"ok: {count()} checks")


if __name__ == "__main__":
    main()
