"""The paper's toolchain: a TeX engine for main.pdf and poppler's pdftotext for reading it back.

`make setup` runs `python -m echo_lib.report.toolchain install`: on Debian/Ubuntu as root it installs
APT_PACKAGES with one apt-get call (skipped when everything is there); elsewhere it prints the one
command to run. `python -m echo_lib.report.toolchain check` says what is present.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

# latexmk drives pdflatex + bibtex; texlive-latex-recommended holds every package main.tex uses (booktabs,
# natbib, hyperref, microtype, ...); lmodern gives vector fonts under T1 (without it: bitmap fonts);
# poppler-utils has pdftotext (the read-back test) and pdftoppm (pages as PNG).
APT_PACKAGES = ["latexmk", "texlive-latex-recommended", "lmodern", "poppler-utils"]
CONDA_HINT = "conda install -c conda-forge tectonic poppler"
COMMANDS = ["latexmk", "pdflatex", "bibtex", "pdftotext", "pdftoppm"]


def present() -> dict[str, bool]:
    """What the paper needs, by name: the commands and the lmodern fonts."""
    found = {c: shutil.which(c) is not None for c in COMMANDS}
    found["lmodern"] = _kpsewhich("lmodern.sty")
    found["tectonic"] = shutil.which("tectonic") is not None
    return found


def _kpsewhich(name: str) -> bool:
    if not shutil.which("kpsewhich"):
        return False
    proc = subprocess.run(["kpsewhich", name], capture_output=True, text=True)
    return proc.returncode == 0 and bool(proc.stdout.strip())


def can_build(found: dict[str, bool] | None = None) -> bool:
    """A TeX engine that can typeset main.tex: latexmk with pdflatex, bibtex and lmodern, or tectonic."""
    found = found or present()
    return all(found[k] for k in ("latexmk", "pdflatex", "bibtex", "lmodern")) or found["tectonic"]


def can_read_back(found: dict[str, bool] | None = None) -> bool:
    return (found or present())["pdftotext"]


def can_apt_install() -> bool:
    """Debian/Ubuntu as root: `make setup` installs the toolchain itself."""
    return sys.platform.startswith("linux") and shutil.which("apt-get") is not None and os.geteuid() == 0


def apt_install_command() -> list[str]:
    return ["apt-get", "install", "-y", "-q", "--no-install-recommends", *APT_PACKAGES]


def install_hint() -> str:
    """The one command that installs the toolchain on this machine (for someone who is not root)."""
    if shutil.which("apt-get"):
        return "sudo apt-get install -y --no-install-recommends " + " ".join(APT_PACKAGES)
    return CONDA_HINT


def missing_for_apt(found: dict[str, bool]) -> list[str]:
    return [k for k in ("latexmk", "pdflatex", "bibtex", "lmodern", "pdftotext", "pdftoppm") if not found[k]]


def apt_install(run=subprocess.run) -> int:
    """apt-get install; when it cannot find the packages (empty package lists), apt-get update and retry."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if run(apt_install_command(), env=env).returncode == 0:
        return 0
    print("apt-get install failed; refreshing the package lists (apt-get update) and trying once more")
    run(["apt-get", "update", "-q"], env=env)
    return run(apt_install_command(), env=env).returncode


def install() -> int:
    """make setup's step: install what is missing where possible, else print the command. Non-zero only
    when an apt-get install that was tried failed."""
    found = present()
    missing = missing_for_apt(found)
    if not missing:
        print("paper toolchain present (latexmk, pdflatex, bibtex, lmodern, pdftotext): nothing to install")
        return 0
    if can_apt_install():
        print(f"paper toolchain: {', '.join(missing)} missing; installing {' '.join(APT_PACKAGES)} with apt-get")
        start = time.monotonic()
        rc = apt_install()
        still = missing_for_apt(present())
        if rc != 0 or still:
            print(f"apt-get install failed (exit {rc}); still missing: {', '.join(still) or 'nothing'}. "
                  f"Run by hand: {' '.join(apt_install_command())}")
            return 1
        print(f"paper toolchain installed in {time.monotonic() - start:.0f} s")
        return 0
    if can_build(found) and can_read_back(found):
        print("paper toolchain present (tectonic, pdftotext)")
        return 0
    print(f"paper toolchain: {', '.join(missing)} missing, and this set-up cannot install it (needs root on "
          f"Debian/Ubuntu). main.pdf needs it; install with:\n  {install_hint()}")
    return 0


def check() -> int:
    found = present()
    for name, ok in found.items():
        print(f"{name:10s} {'yes' if ok else 'no'}")
    print(f"can build main.pdf: {can_build(found)}; can read it back: {can_read_back(found)}")
    return 0 if can_build(found) and can_read_back(found) else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["install"]:
        return install()
    if argv == ["check"]:
        return check()
    print("usage: python -m echo_lib.report.toolchain install|check")
    return 2


if __name__ == "__main__":
    sys.exit(main())
