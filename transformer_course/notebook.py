"""Deprecated: the chapters' display helpers moved to `transformer_course.course.notebook`; kept one release.

`import transformer_course.notebook` gives that module itself, so `from transformer_course.notebook import glue`
in a reader's notebook keeps working.
"""

import sys
import warnings

from .course import notebook as _notebook

warnings.warn(
    "transformer_course.notebook moved to transformer_course.course.notebook", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = _notebook
