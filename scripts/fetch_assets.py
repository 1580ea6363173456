"""Fetch the JavaScript the book needs to work offline into book/_vendor/ (ignored by git).

    python scripts/fetch_assets.py            # no-op when the pinned versions are already there

The default Jupyter Book page loads MathJax and the ipywidgets renderer from public CDNs, so offline
(or where a CDN is blocked) math shows as raw TeX and saved widgets show nothing. This script takes
both packages from the npm registry (plain HTTPS, no Node needed), checks each tarball against the
integrity hash that npm publishes, and unpacks only the files the pages load:

- MathJax 3 (tex-mml-chtml.js, its woff-v2 fonts, TeX extensions, menu and accessibility modules);
- @jupyter-widgets/html-manager (embed.js, the bundle that renders saved widget state, and its fonts),
  plus book/assets/mathjax2-shim.js: html-manager still calls MathJax 2's MathJax.Hub.Queue.

_config.yml serves book/_vendor/ as a static path. Set NPM_REGISTRY to use a mirror.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "book" / "_vendor"
SHIM = ROOT / "book" / "assets" / "mathjax2-shim.js"
REGISTRY = os.environ.get("NPM_REGISTRY", "https://registry.npmjs.org").rstrip("/")


@dataclass(frozen=True)
class Package:
    name: str  # npm name
    version: str
    integrity: str  # sha512, as `npm view NAME@VERSION dist.integrity` prints it
    target: str  # folder under book/_vendor/
    keep: tuple[str, ...]  # path prefixes inside the tarball's package/ folder

    @property
    def url(self) -> str:
        return f"{REGISTRY}/{self.name}/-/{self.name.split('/')[-1]}-{self.version}.tgz"


PACKAGES = (
    Package(
        "mathjax",
        "3.2.2",
        "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
        "mathjax",
        (
            "LICENSE",
            "es5/tex-mml-chtml.js",
            "es5/output/chtml/fonts/woff-v2/",
            "es5/input/tex/extensions/",
            "es5/ui/",
            "es5/a11y/",
        ),
    ),
    Package(
        "@jupyter-widgets/html-manager",
        "1.0.15",
        "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        "widgets",
        ("LICENSE", "dist/embed.js", "dist/embed.js.LICENSE.txt", "dist/*.woff", "dist/*.woff2", "dist/*.ttf",
         "dist/*.eot", "dist/*.svg"),
    ),
)  # fmt: skip


def stamp() -> str:
    return "\n".join(f"{p.name}@{p.version}" for p in PACKAGES) + "\n" + SHIM.read_text()


def download(package: Package) -> bytes:
    try:
        with urllib.request.urlopen(package.url, timeout=120) as response:
            data = response.read()
    except OSError as error:
        raise SystemExit(f"fetch_assets: cannot download {package.url}: {error}") from error
    algorithm, expected = package.integrity.split("-", 1)
    actual = base64.b64encode(hashlib.new(algorithm, data).digest()).decode()
    if actual != expected:
        raise SystemExit(f"fetch_assets: {package.url} does not match its pinned {algorithm} integrity hash")
    return data


def wanted(path: str, keep: tuple[str, ...]) -> bool:
    for pattern in keep:
        if "*" in pattern:
            folder, suffix = pattern.split("*", 1)
            if path.startswith(folder) and "/" not in path[len(folder) :] and path.endswith(suffix):
                return True
        elif path == pattern or (pattern.endswith("/") and path.startswith(pattern)):
            return True
    return False


def unpack(package: Package, data: bytes, dest: Path) -> int:
    """Write the kept files of the tarball under dest, dropping the es5/ or dist/ level; returns the count."""
    count = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            path = member.name.removeprefix("package/")
            if not member.isfile() or not wanted(path, package.keep):
                continue
            relative = path.split("/", 1)[1] if path.startswith(("es5/", "dist/")) else path
            out = dest / relative
            if ".." in Path(relative).parts:
                raise SystemExit(f"fetch_assets: unsafe path {member.name} in {package.url}")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(tar.extractfile(member).read())
            count += 1
    return count


def main() -> int:
    stamp_file = VENDOR / ".stamp"
    if stamp_file.exists() and stamp_file.read_text() == stamp():
        return 0
    staging = Path(tempfile.mkdtemp(prefix="book-vendor-"))
    for package in PACKAGES:
        count = unpack(package, download(package), staging / package.target)
        print(f"fetch_assets: {package.name}@{package.version}: {count} files -> book/_vendor/{package.target}/")
    shutil.copy(SHIM, staging / "widgets" / SHIM.name)
    (staging / ".stamp").write_text(stamp())
    staging.chmod(0o755)  # mkdtemp makes it private; the site is meant to be served
    shutil.rmtree(VENDOR, ignore_errors=True)
    shutil.move(staging, VENDOR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
