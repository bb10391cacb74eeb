"""Helpers of the course "GPU computing in PyTorch".

Every helper is written, and explained, in the lesson that teaches it: a code cell
of that notebook whose first line is ``#@save``. ``python -m d2l_utils.build``
copies those cells into ``d2l_utils/lessons.py``; use them as ``import d2l_utils as d2l``
and ``d2l.try_gpu()``. (If lessons.py is ever broken, ``python d2l_utils/build.py``
rebuilds it without importing the package.)

Three modules are course machinery rather than lesson material, and are written by hand:
``gpu_models.py`` holds the reference GPUs' datasheet table and the models that predict
what a GPU shows; ``expectations/`` says, for every GPU-only cell, what it is expected to
show (``d2l.check_expected`` compares it with a measurement on a GPU); ``recordings.py``
gives GPU-only cells their fallback, ``d2l.show_recording``, which shows on a machine
without a GPU the expectation and, once one is installed, what the cell printed on real
hardware. ``calculators.py`` puts those models behind sliders (``ipywidgets``) in lessons 3, 8,
10, 12 and 14.
"""
import importlib.util

if importlib.util.find_spec('torch') is None:
    # A Python without PyTorch: `python -m d2l_utils.setup_check` imports this package first, and
    # must still run to say what to install. Every helper needs torch, so none is loaded.
    __all__ = []

    def __getattr__(name):
        raise ImportError(f'd2l_utils.{name} needs PyTorch, which is not installed here: '
                          'python -m d2l_utils.setup_check says what to install')
else:
    from .lessons import *  # noqa: F401,F403
    from .lessons import __all__ as _lesson_names
    from .expectations import check_expected, use_language  # noqa: F401
    from .recordings import show_recording, this_run  # noqa: F401
    from . import calculators  # noqa: F401,E402  (d2l.calculators.memory_calculator(), ...)

    __all__ = [*_lesson_names, 'show_recording', 'this_run', 'check_expected', 'use_language']
