"""Helpers of the course "GPU computing in PyTorch".

Every helper is written, and explained, in the lesson that teaches it: a code cell
of that notebook whose first line is ``#@save``. ``python -m d2l_utils.build``
copies those cells into ``d2l_utils/lessons.py``; use them as ``import d2l_utils as d2l``
and ``d2l.try_gpu()``. (If lessons.py is ever broken, ``python d2l_utils/build.py``
rebuilds it without importing the package.)

One module is course machinery rather than lesson material, and is written by hand:
``recordings.py`` gives GPU-only cells their fallback, ``d2l.show_recording``, which
shows on a machine without a GPU what the cell printed on real hardware.
"""
from .lessons import *  # noqa: F401,F403
from .lessons import __all__ as _lesson_names
from .recordings import show_recording  # noqa: F401

__all__ = [*_lesson_names, 'show_recording']
