"""radixkv from Python: the prefix caches, the cache simulator and the engine.

    import radixkv
    c = radixkv.Cache("radix", page_size=16, num_pages=1024, policy="lru")
    m = c.match(tokens)            # m.length, m.pages (numpy.int32), the handle
    c.lock(m); ...; c.unlock(m)
    res = radixkv.cache_sim("trace.jsonl", cache="radix", capacity=4096, page_size=16)
    res.requests[0], res.summary["hit_rate"]

Kinds, policies and hash functions come from the library's registries
(kinds(), policies(), hash_functions()); cache_sim() and run() take the
options of `radixkv cache-sim` and `radixkv run`, spelt as keywords
(page_size=16 is --page-size 16, check=True is --check), and the command's
own option table parses them: the same names, checks and defaults as the CLI.
The package needs only the standard library (numpy, when installed, is what
page ids come back as); radixkv.sglang imports sglang.
"""
import json
import os
import tempfile
from typing import Any, Dict, Iterable, List, NamedTuple, Union

from ._radixkv import (Cache, Error, Match, OutOfPages, hash_functions, kinds, namespace_id,
                       policies)
from . import _radixkv

__all__ = ["Cache", "Match", "Error", "OutOfPages", "kinds", "policies", "hash_functions",
           "namespace_id", "cache_sim", "run", "SimResult", "RunResult"]


class SimResult(NamedTuple):
    """What cache_sim() returns: one dict per trace line ({"id", "step",
    "matched", "new"} or {"id", "step", "error"}), one per step that evicted
    ({"step", "evicted": [[tokens], ...]}) and the summary line, each exactly
    as `radixkv cache-sim` prints it (without "type")."""
    requests: List[Dict[str, Any]]
    steps: List[Dict[str, Any]]
    summary: Dict[str, Any]


class RunResult(NamedTuple):
    """What run() returns: one dict per finished request and the summary, as
    `radixkv run` prints them; other lines (if any) in `other`."""
    requests: List[Dict[str, Any]]
    summary: Dict[str, Any]
    other: List[Dict[str, Any]]


_TraceArg = Union[str, "os.PathLike[str]", Iterable[Dict[str, Any]]]


def _option_args(options: Dict[str, Any], command: str) -> List[str]:
    """Keywords as the command's argv: True is a flag, False and None leave
    the option out, anything else is its value as text."""
    args = []
    for key, value in options.items():
        if key in ("out", "no_progress"):
            raise TypeError(f"radixkv.{command}: {key}= is not an option here (results are "
                            "returned; there is no progress bar)")
        name = "--" + key.replace("_", "-")
        if value is True:
            args.append(name)
        elif value is False or value is None:
            continue
        else:
            args += [name, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return args


def _run_command(command: str, trace: _TraceArg, args: List[str]) -> List[Dict[str, Any]]:
    """Runs `radixkv COMMAND args... TRACE` in this process (GIL released)
    and returns its JSON lines. An iterable of requests is written to a
    temporary JSON Lines file first."""
    with tempfile.TemporaryDirectory(prefix="radixkv-") as tmp:
        if isinstance(trace, (str, os.PathLike)):
            path = os.fspath(trace)
            if path == "-":
                raise ValueError(f"radixkv.{command}: trace '-' (stdin) is the CLI's; pass a "
                                 "file or an iterable of requests")
        elif isinstance(trace, (bytes, dict)):
            raise TypeError(f"radixkv.{command}: trace is a path or an iterable of request "
                            f"dicts, not {type(trace).__name__}")
        else:
            path = os.path.join(tmp, "trace.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                for i, req in enumerate(trace):
                    if not isinstance(req, dict):
                        raise TypeError(f"radixkv.{command}: trace item {i} is a "
                                        f"{type(req).__name__}, not a dict")
                    f.write(json.dumps(req, default=_json_default))
                    f.write("\n")
        out = os.path.join(tmp, "out.jsonl")
        # cache-sim takes the trace as its positional, run as --trace.
        argv = args + ["--no-progress", "--out", out] + (
            ["--trace", path] if command == "run" else [path])
        rc, err, interrupted = _radixkv._command(command, argv)
        if interrupted:
            raise KeyboardInterrupt(f"radixkv.{command}: interrupted")
        if rc != 0:
            raise Error(err.strip() or f"radixkv {command} exited with status {rc}")
        with open(out, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]


def _json_default(x):
    # numpy arrays and scalars, array.array, ranges: tokens as plain ints.
    if hasattr(x, "tolist"):
        return x.tolist()
    try:
        return [int(v) for v in x]
    except TypeError:
        raise TypeError(f"{type(x).__name__} is not JSON serializable") from None


def cache_sim(trace: _TraceArg, **options: Any) -> SimResult:
    """Replays a trace through one cache kind without a model, as
    `radixkv cache-sim` does (docs/ARCHITECTURE.md, cache simulator contract).

    trace: a JSON Lines or Mooncake trace file, or an iterable of request
    dicts ({"id", "tokens", "step"?, "namespace"?, ...}). options: the
    command's options as keywords, e.g. cache="radix", capacity=4096,
    page_size=16, evict_policy="lru", check=True. Runs with the GIL released;
    Ctrl-C stops after the current step and raises KeyboardInterrupt (a third
    Ctrl-C during the call ends the process at once, as it ends the CLI's). Errors
    (a bad option, a malformed trace line) raise radixkv.Error with the
    command's message."""
    requests, steps, summary = [], [], None
    for line in _run_command("cache-sim", trace, _option_args(options, "cache_sim")):
        kind = line.pop("type", None)
        if kind == "request":
            requests.append(line)
        elif kind == "step":
            steps.append(line)
        elif kind == "summary":
            summary = line
    if summary is None:
        raise Error("radixkv.cache_sim: the command printed no summary line")
    return SimResult(requests, steps, summary)


def run(trace: _TraceArg, backend: str = "sim", **options: Any) -> RunResult:
    """Serves a trace with the engine, as `radixkv run --backend BACKEND`
    does: backend "sim" (modelled GPU time) or "cpu" (the real model on the
    CPU; needs model=...). options: run's options as keywords. Runs with the
    GIL released; Ctrl-C raises KeyboardInterrupt after the command stopped."""
    args = ["--backend", backend] + _option_args(options, "run")
    requests, summary, other = [], None, []
    for line in _run_command("run", trace, args):
        kind = line.get("type")
        if kind == "summary":
            line.pop("type")
            summary = line
        elif kind in (None, "request"):
            line.pop("type", None)
            requests.append(line)
        else:
            other.append(line)
    if summary is None:
        raise Error("radixkv.run: the command printed no summary line")
    return RunResult(requests, summary, other)
