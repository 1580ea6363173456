"""Deprecated location of `transformer_course.course.benchmark`; kept one release.

`python -m transformer_course.benchmark` and `from transformer_course import benchmark` keep working: this
package is that one, under its old name.
"""

import sys
import warnings

from ..course import benchmark as _benchmark

warnings.warn(
    "transformer_course.benchmark moved to transformer_course.course.benchmark", DeprecationWarning, stacklevel=2
)
_NEW = "transformer_course.course.benchmark"
for _name, _module in list(sys.modules.items()):
    if _name.startswith(_NEW + "."):
        sys.modules[__name__ + _name[len(_NEW) :]] = _module
sys.modules[__name__] = _benchmark
