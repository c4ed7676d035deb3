"""Inert stand-in for IPython.display (see ../README.md)."""


def _unavailable(*args, **kwargs):
    raise RuntimeError("IPython is a stand-in in this venv")


HTML = display = _unavailable
