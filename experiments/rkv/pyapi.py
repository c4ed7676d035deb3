"""The radixkv Python package (python/radixkv) for a driver: the one built in
the same build folder as the radixkv binary the driver runs, so that the
package's in-process commands and the binary are the same code.

    from rkv import pyapi
    radixkv, why_not = pyapi.load(binary)
    if radixkv is None: ...            # why_not says what is missing

A build that has the binary need not have the package (meson's `python`
option is off, or the Python headers are missing), and a sanitizer build's
extension cannot be imported into an uninstrumented Python at all (the ASan
runtime must come first and ends the process otherwise). So the import is
probed in a child process before this process tries it: a failed probe
leaves the driver running, with the reason.
"""
import os
import subprocess
import sys


def package_dir(binary):
    """build/python for build/runtime/radixkv (meson puts the package's
    files there: python/radixkv/meson.build)."""
    build = os.path.dirname(os.path.dirname(os.path.abspath(binary)))
    return os.path.join(build, "python")


def load(binary):
    """(the radixkv module, None), or (None, the reason it cannot be used)."""
    path = package_dir(binary)
    if not os.path.isfile(os.path.join(path, "radixkv", "__init__.py")):
        return None, (f"the package is not built beside {binary} ({path}/radixkv is missing: "
                      "meson's python option is off or the Python headers were not found)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [path] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    probe = subprocess.run([sys.executable, "-c", "import radixkv"], env=env,
                           capture_output=True, text=True)
    if probe.returncode != 0:
        err = (probe.stderr.strip().splitlines() or [f"exit status {probe.returncode}"])[-1]
        return None, f"{sys.executable} cannot import the package in {path}: {err}"
    if path not in sys.path:
        sys.path.insert(0, path)
    import radixkv  # noqa: E402 - the probe above showed this import works
    if os.path.dirname(os.path.abspath(radixkv.__file__)) != os.path.join(path, "radixkv"):
        return None, (f"another radixkv package was imported first ({radixkv.__file__}), "
                      f"not the one beside {binary}")
    return radixkv, None
