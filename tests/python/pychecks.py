"""check() and raises() for the python suite's tests: a failed check prints
"FAIL: what" and exits 1 (the first difference ends the test); count() is
how many checks have passed."""
import sys

_passed = 0


def check(cond, what):
    global _passed
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    _passed += 1


def raises(exc, fn, what):
    """fn() must raise exc with a message; returns the message."""
    try:
        fn()
    except exc as e:
        check(str(e) != "", f"{what}: {exc.__name__} without a message")
        return str(e)
    except Exception as e:  # noqa: BLE001 - the wrong type is the failure
        check(False, f"{what}: expected {exc.__name__}, got {type(e).__name__}: {e}")
    else:
        check(False, f"{what}: expected {exc.__name__}, nothing raised")


def count():
    return _passed
