"""Helpers of the course "GPU computing in PyTorch".

Every helper is written, and explained, in the lesson that teaches it: a code cell
of that notebook whose first line is ``#@save``. ``python -m d2l_utils.build``
copies those cells into ``d2l_utils/lessons.py``; use them as ``import d2l_utils as d2l``
and ``d2l.try_gpu()``. (If lessons.py is ever broken, ``python d2l_utils/build.py``
rebuilds it without importing the package.)
"""
from .lessons import *  # noqa: F401,F403
from .lessons import __all__  # noqa: F401
