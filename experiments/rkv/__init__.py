"""rkv: the experiments' one Python package (standard library only).

    rkv.core      finding the binary, the driver's options, one row format,
                  progress, property reports, running a notebook
    rkv.stats     repeats: median with min-max
    rkv.tex       the numbers the paper's prose and tables carry (generated)
    rkv.mooncake  Mooncake-format traces and cache-sim / run helpers
    rkv.bundle    row provenance (binary, hash, build type, host), results bundles
                  and their manifest, the scales a set of results mixes
    rkv.reference reference numbers with tolerances (experiments/reproduce)
    rkv.jobs      sweep points as independent jobs: --jobs N here, --ray ADDRESS
    rkv.pyapi     the radixkv Python package built beside the binary, when it
                  imports (tree_evolution's replay)
    rkv.redis_server  a private redis-server on loopback (remote_tier,
                  disaggregation; tests/redis_util.py builds on it)
    rkv.checks.NAME  each experiment's stated properties, imported by both
                  experiments/NAME/run --check and notebooks/NAME.ipynb

A driver or notebook reaches it with experiments/ on sys.path:

    sys.path.insert(0, <repo>/experiments)
    from rkv import core
    from rkv.checks import overhead

experiments/common.py and experiments/real_trace_capacity/rkvexp.py are the
old names of the same helpers, kept so that drivers written against them run
unchanged; new code imports rkv.
"""
