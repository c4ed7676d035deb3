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
import subprocess
import sys


class CliCheck:
    def __init__(self, exe):
        self.exe = exe
        self.failures = 0

    def run(self, args, stdin=""):
        """(exit status, stdout, stderr) of `exe args` with stdin as its input."""
        p = subprocess.run([self.exe] + args, input=stdin, capture_output=True, text=True)
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
