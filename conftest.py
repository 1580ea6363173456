"""The repository's root conftest: every pytest run, notebooks included, uses the course's nbval extension.

tests/nbval_tolerance.py compares numbers within the tolerance a notebook cell declares and reports which
number differs; see its docstring.
"""

pytest_plugins = ["tests.nbval_tolerance"]
