"""The package as `pip install .` put it into a venv (scripts/py_venv.sh;
run_tests exports its python as RKV_PYPKG_PYTHON): imported from the venv's
site-packages, never from the clone or the build tree, and the API tests
pass against it. Skips (77) when no such python is given.
"""
import os
import subprocess
import sys

py = os.environ.get("RKV_PYPKG_PYTHON")
if not py:
    print("skip: RKV_PYPKG_PYTHON is not set (run_tests makes the venv with scripts/py_venv.sh)")
    sys.exit(77)
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD")}
where = subprocess.run([py, "-c", "import radixkv, sys; print(radixkv.__file__); "
                        "print(sys.prefix)"], capture_output=True, text=True, env=env,
                       cwd="/")
if where.returncode != 0:
    print("FAIL: import radixkv in", py, ":", where.stderr)
    sys.exit(1)
path, prefix = where.stdout.split()
if not path.startswith(prefix):
    print(f"FAIL: radixkv came from {path}, not from the venv {prefix}")
    sys.exit(1)
print("installed package:", path)
r = subprocess.run([py, os.path.abspath(sys.argv[1])], env=env, cwd="/")
sys.exit(r.returncode)
