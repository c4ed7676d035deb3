"""Inert stand-in for IPython (see ../README.md): sglang.utils imports its
display helpers for notebooks."""
