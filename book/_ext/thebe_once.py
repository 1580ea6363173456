"""The book's own Sphinx extension: sphinx-thebe's configuration script included once per page.

Sphinx 7.2 to 8.2.1 include an inline script that an extension registers with `app.add_js_file(None,
body=...)` twice on every page: once under the file name None, as the extension registered it, and once
under the file name "", as the HTML builder re-reads the registry before writing, and the two do not compare
equal. sphinx-thebe registers its configuration this way (`const THEBE_JS_URL = ...`), so the second copy
throws "Identifier 'THEBE_JS_URL' has already been declared" on every page. Sphinx 8.2.2 fixed it by using
"" both times; Jupyter Book 1 cannot use Sphinx 8, so this extension does the same for the HTML builder.

Enabled in _config.yml under `sphinx: local_extensions`.
"""

from __future__ import annotations

from typing import Any


def register_inline_scripts_once(app) -> None:
    add_js_file = getattr(app.builder, "add_js_file", None)
    if add_js_file is None:  # not an HTML builder
        return

    def add_js_file_named_as_when_written(filename: str | None, **kwargs: Any) -> None:
        add_js_file(filename or "", **kwargs)

    app.builder.add_js_file = add_js_file_named_as_when_written


def setup(app) -> dict[str, Any]:
    app.connect("builder-inited", register_inline_scripts_once)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
