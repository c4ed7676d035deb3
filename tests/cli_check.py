"""Shared by the script tests of radixkv's command line: run the binary with
arguments and stdin, and check without stopping, so that one run reports
every failure (each on stderr as it happens). A test finds it beside its own
folder:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from cli_check import CliCheck
    cli = CliCheck(sys.argv[1])
    run, check = cli.run, cli.check
    ...
    sys.exit(cli.finish("what passed"))
"""
import os
import subprocess
import sys


class CliCheck:
    def __init__(self, exe):
        self.exe = exe
        self.failures = 0

    def run(self, args, stdin="", env=None, timeout=None, preexec_fn=None):
        """(exit status, stdout, stderr) of `exe args` with stdin as its input
        (None: this process's). env: variables set over this process's
        environment. Past timeout seconds the run is killed and
        subprocess.TimeoutExpired raised, as subprocess.run does."""
        e = dict(os.environ, **env) if env else None
        p = subprocess.run([self.exe] + args, input=stdin, capture_output=True, text=True, env=e,
                           timeout=timeout, preexec_fn=preexec_fn)
        return p.returncode, p.stdout, p.stderr

    def check(self, cond, what):
        if not cond:
            self.failures += 1
            print("FAIL:", what, file=sys.stderr)
        return cond

    def finish(self, passed):
        """The exit status: 1 after any failure (their count on stderr), else 0
        (passed on stdout)."""
        if self.failures:
            print(f"{self.failures} check(s) failed", file=sys.stderr)
            return 1
        print(passed)
        return 0
