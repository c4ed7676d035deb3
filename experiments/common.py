"""The experiments' helpers under their old name: everything here is rkv.core
(experiments/rkv/). Drivers written against `import common` keep working;
new drivers import rkv (see experiments/rkv/__init__.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rkv.core import *  # noqa: E402,F401,F403
from rkv.core import ROOT, HERE  # noqa: E402,F401
