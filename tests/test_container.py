"""The container recipes (Dockerfile, container/echo.def, .dockerignore) install the environment only
through the Makefile: `make setup` is the one list of install steps, so the image cannot drift from the
lock. No container runtime is needed here: the recipes are read, not built."""
import fnmatch
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from echo_lib.report import toolchain
from test_readme import commands as readme_commands

ROOT = Path(__file__).resolve().parents[1]
APPTAINER = ROOT / "container" / "echo.def"
# What the Makefile needs before it can run and the slim Python image lacks (the Dockerfile says why).
APT_ALLOWED = {"make", "git"}
INSTALLERS = re.compile(r"(^|[\s;&|(/])(pip3?|uv|conda|mamba|micromamba|poetry|pipx|easy_install)"
                        r"(\s+\S+)*?\s+(install|add|sync)\b|\bsetup\.py\s+(install|develop)\b|\bpip\s+download\b")
TEX = re.compile(r"^(texlive|latexmk|lmodern|poppler|tectonic|tex|context|biber|lualatex|xelatex)")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    lines, out, current = text.splitlines(), [], ""
    for line in lines:
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if current and line.lstrip().startswith("#"):  # a comment inside a continued instruction
            continue
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        word, _, rest = current.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        current = ""
    return out


def expand_args(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """RUN lines with the ARG defaults filled in ($NAME and ${NAME}): what a plain `docker build` runs."""
    args, out = {}, []
    for word, rest in steps:
        if word == "ARG" and "=" in rest:
            name, value = rest.split("=", 1)
            args[name.strip()] = value.strip().strip('"')
        for name, value in args.items():
            rest = re.sub(r"\$\{?" + name + r"\}?(?!\w)", value, rest)
        out.append((word, rest))
    return out


def shell_commands(run: str) -> list[list[str]]:
    """A RUN line's simple commands (split at && || ; |), each as its words."""
    if run.startswith("["):
        run = " ".join(shlex.quote(w) for w in json.loads(run))
    return [shlex.split(part) for part in re.split(r"&&|\|\||;|\|", run) if part.strip()]


def apt_installed(runs: list[str]) -> set[str]:
    pkgs = set()
    for run in runs:
        for words in shell_commands(run):
            if words[:1] in (["apt-get"], ["apt"]) and "install" in words:
                pkgs |= {w for w in words[words.index("install") + 1:] if not w.startswith("-")}
    return pkgs


def dockerfile() -> list[tuple[str, str]]:
    return expand_args(instructions((ROOT / "Dockerfile").read_text()))


def runs(steps=None) -> list[str]:
    return [rest for word, rest in (steps or dockerfile()) if word == "RUN"]


def test_the_base_is_debian_with_python_3_11():
    steps = dockerfile()
    base = [rest for word, rest in steps if word == "FROM"]
    assert len(base) == 1, "one stage: the image is the set-up"
    image = base[0].split()[0]
    assert re.fullmatch(r"python:3\.11(\.\d+)?-(slim-)?(bookworm|trixie)", image), (
        f"FROM {image}: the lock is for CPython 3.11 on Linux x86_64, and toolchain.py apt-installs on Debian")


def test_python_packages_come_only_from_make_setup():
    for run in runs():
        assert not INSTALLERS.search(run), (
            f"the Dockerfile installs Python packages itself ({run!r}): `make setup` installs the lock")


def test_make_setup_runs_after_the_project_is_copied():
    steps = dockerfile()
    words = [(i, w) for i, (kind, rest) in enumerate(steps) if kind == "RUN" for w in shell_commands(rest)]
    setup = [i for i, w in words if w[:1] == ["make"] and "setup" in w[1:]]
    assert setup, "the Dockerfile must run `make setup` (with its default build arguments)"
    copy = [i for i, (kind, rest) in enumerate(steps) if kind in ("COPY", "ADD") and rest.split()[0] == "."]
    assert copy and copy[0] < setup[0], "COPY the project before `make setup` (it needs the Makefile and the lock)"
    workdir = [rest for kind, rest in steps[:setup[0]] if kind == "WORKDIR"]
    assert workdir and workdir[-1] == "/echo", "make runs in the image's checkout, /echo (container/echo.def cds there)"


def test_tex_comes_from_the_makefile_not_from_apt_here():
    pkgs = apt_installed(runs())
    tex = {p for p in pkgs if p in toolchain.APT_PACKAGES or TEX.match(p)}
    assert not tex, f"the Dockerfile apt-installs {sorted(tex)}: `make setup` installs the paper's toolchain"
    assert pkgs <= APT_ALLOWED, (
        f"apt-get installs {sorted(pkgs - APT_ALLOWED)}: only what the Makefile needs before it can run "
        f"({sorted(APT_ALLOWED)}); add a package here, with the reason in the Dockerfile, if make needs it")


def test_the_default_command_is_a_readme_command():
    cmds = [rest for word, rest in dockerfile() if word in ("CMD", "ENTRYPOINT")]
    assert len(cmds) == 1 and [w for w, _ in dockerfile() if w == "CMD"], "one CMD, no ENTRYPOINT"
    cmd = cmds[0]
    cmd = " ".join(json.loads(cmd)) if cmd.startswith("[") else cmd
    assert cmd in readme_commands(), f"CMD {cmd!r} is not one of the README's commands"
    assert cmd == "make all", "the image's default is the README's first command"


def test_the_readme_shows_how_to_build_run_and_test_the_image():
    cmds = readme_commands()
    assert any(c.startswith("docker build -t echo .") for c in cmds)
    assert any(c.startswith("docker run") and c.split("#")[0].rstrip().endswith(" echo") for c in cmds), \
        "docker run ... echo (the default command, make all)"
    assert any(c.startswith("docker run") and "echo make test" in c for c in cmds), "make test in the image"
    assert any(c.startswith("apptainer build") and "container/echo.def" in c for c in cmds)


def test_apptainer_builds_from_the_same_image():
    text = APPTAINER.read_text()
    header = dict(re.findall(r"^(Bootstrap|From):\s*(\S+)", text, re.M))
    assert header.get("Bootstrap") in ("docker-daemon", "docker"), header
    tag = next(c.split()[3] for c in readme_commands() if c.startswith("docker build -t "))
    image = tag if ":" in tag else f"{tag}:latest"
    assert header.get("From", "").endswith(image), (
        f"container/echo.def builds From {header.get('From')!r}, the README's Docker image is {image!r}")
    # Apptainer adds nothing of its own: no package installs in %post
    post = re.search(r"^%post\n(.*?)(?=^%|\Z)", text, re.M | re.S)
    body = post.group(1) if post else ""
    assert not INSTALLERS.search(body) and not re.search(r"apt(-get)?\s+install", body)
    runscript = re.search(r"^%runscript\n(.*?)(?=^%|\Z)", text, re.M | re.S).group(1)
    assert "cd /echo" in runscript and "make" in runscript


def test_dockerignore_keeps_outputs_out_and_the_project_in():
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    for needed in (".venv", "results", ".snakemake"):
        assert needed in patterns, f".dockerignore must leave out {needed}"
    assert ".git" not in patterns, "provenance records the commit: copy .git"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")

    def ignored(path: str) -> bool:
        for p in patterns:
            p = p.strip("/")
            glob = p[3:] if p.startswith("**/") else p
            parts = path.split("/")
            prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
            if p.startswith("**/"):
                prefixes += ["/".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)]
            if any(fnmatch.fnmatchcase(x, glob) for x in prefixes):
                return True
        return False

    left_out = [f for f in tracked if ignored(f)]
    assert not left_out, f".dockerignore leaves out tracked files (the image would differ from the commit): {left_out[:10]}"
