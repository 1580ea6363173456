"""Deprecated location of `transformer_course.course.exercises` (the exercise checkers); kept one release.

`from transformer_course.exercises import check, solutions` and `import transformer_course.exercises.attention`
in a reader's notebook keep working: this package is that one, under its old name.
"""

import sys
import warnings

from ..course import exercises as _exercises

warnings.warn(
    "transformer_course.exercises moved to transformer_course.course.exercises", DeprecationWarning, stacklevel=2
)
_NEW = "transformer_course.course.exercises"
for _name, _module in list(sys.modules.items()):  # every checker module, under its old name too: one registry
    if _name.startswith(_NEW + "."):
        sys.modules[__name__ + _name[len(_NEW) :]] = _module
sys.modules[__name__] = _exercises
