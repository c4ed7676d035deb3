"""The one preamble of the tests that need packages from a venv of their own
(SGLang, vLLM, torch, the serve clients): meson starts them with whatever
Python it found, and they re-execute themselves under the venv's Python,
which run_tests exports in an environment variable (RKV_SGLANG_PYTHON,
RKV_VLLM_PYTHON, RKV_TORCH_PYTHON, RKV_SERVE_PYTHON, made by the
scripts/*_venv.sh of the same name).

Standard library only, so it imports before the re-exec. A test finds it
beside its own folder:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from venv_reexec import reexec_in_venv
"""
import os
import sys

SKIP = 77  # meson's exit status for a skipped test


def reexec_in_venv(env_var, script, made_by, needs=None):
    """Run script (the calling test's own file) under the Python env_var
    names, once, on the same arguments.

    Returns when already running there, or when the module needs names
    imports in the running Python (no venv wanted then): the caller goes on.
    Exits SKIP, printing why, when needs does not import under the venv
    either. Exits SKIP,
    printing why, when the test cannot run here: env_var unset or not an
    executable (made_by says how the venv is made), or the Python package
    suite's sanitizer build (RKV_PY_SANITIZED: the ASan runtime is preloaded
    for the package's extension, and torch, in every such venv, does not run
    with it; the normal build runs these tests). Otherwise it does not
    return: the process becomes the venv's Python.

    The re-exec is marked in the environment rather than recognized by the
    interpreter's path: a venv's python is a link to the system one, so
    the two resolve to the same file."""
    marker = "RKV_IN_VENV_" + env_var
    if needs and _imports(needs):
        return
    if os.environ.get(marker) == "1":
        if needs:
            _skip(f"{needs} does not import under {env_var}={sys.executable}")
        return
    want = os.environ.get(env_var)
    if not want:
        _skip((f"{needs} does not import here and " if needs else "")
              + f"{env_var} is not set ({made_by}; run_tests sets it)")
    if os.environ.get("RKV_PY_SANITIZED") == "1":
        _skip("under the sanitizer build (torch does not run with the ASan runtime preloaded); "
              "the normal build runs this test")
    if not os.access(want, os.X_OK):
        _skip(f"{env_var}={want} is not executable ({made_by})")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(want, [want, os.path.abspath(script)] + sys.argv[1:],
              dict(os.environ, **{marker: "1"}))


def _imports(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def _skip(why):
    print(f"skip: {why}", file=sys.stderr)
    sys.exit(SKIP)
