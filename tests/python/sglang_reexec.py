"""The one preamble of the tests that compare against SGLang's own caches
(test_sglang_adapter.py, test_sglang_vs_cache_sim.py, test_sglang_events.py):
they are started by meson with the Python the package was built for, and run
in the sglang venv (scripts/sglang_venv.sh, exported by run_tests as
RKV_SGLANG_PYTHON), which has SGLang and torch. Standard library only, so it
imports before the re-exec.
"""
import os
import sys

SKIP = 77  # meson's exit status for a skipped test


def reexec_in_sglang_venv():
    """Re-execute the running test under RKV_SGLANG_PYTHON, once.

    Returns None when already running there (the caller goes on), or SKIP
    after printing the reason when the test cannot run here: no venv given,
    or the sanitizer build (torch does not run with the ASan runtime
    preloaded; the normal build runs these tests). Otherwise it does not
    return: the process becomes the venv's Python on the same arguments."""
    if os.environ.get("RKV_IN_SGLANG_VENV") == "1":
        return None
    py = os.environ.get("RKV_SGLANG_PYTHON")
    if not py:
        print("skip: RKV_SGLANG_PYTHON is not set (run_tests makes the venv with "
              "scripts/sglang_venv.sh)")
        return SKIP
    if os.environ.get("RKV_PY_SANITIZED") == "1":
        print("skip: under the sanitizer build (torch does not run with the ASan runtime "
              "preloaded); the normal build runs this test")
        return SKIP
    os.execve(py, [py] + sys.argv, dict(os.environ, RKV_IN_SGLANG_VENV="1"))
