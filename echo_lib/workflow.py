"""`echo-run`: snakemake, after the config files it is given have been read.

    echo-run [snakemake arguments]        e.g.  echo-run --cores 2 --configfile config/ci.yaml

Snakemake reads `--configfile` itself, before the Snakefile runs: a missing file is a Python traceback
and a malformed one "Config file is not valid JSON or YAML" without the file or the line. echo-run reads
each named file (or, with none, config/default.yaml) first, as the run will (a key given twice, an alias
bomb, a folder, FIFO or device in place of the file are errors too; a FIFO or device is never opened), and
stops with one line naming the file and the line; when all of them read, it hands every
argument to snakemake unchanged. What the keys mean is checked by the Snakefile, as under plain snakemake.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from echo_lib.config import ConfigError, read_yaml

CONFIG_FLAGS = ("--configfile", "--configfiles")
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
DEFAULT = "config/default.yaml"   # what the Snakefile reads when no --configfile is given


def named_config_files(argv: Sequence[str]) -> list[str]:
    """The files `--configfile A [B ...]` / `--configfile=A` name, in order (snakemake's nargs='+')."""
    files: list[str] = []
    taking = False
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if flag in CONFIG_FLAGS:
            taking = not eq
            files += [value] if eq else []
        elif taking and not arg.startswith("-"):
            files.append(arg)
        else:
            taking = False
    return files


def config_problems(argv: Sequence[str]) -> list[str]:
    """One line per named config file that is missing, unreadable or not a YAML mapping."""
    problems = []
    named = named_config_files(argv) or ([DEFAULT] if os.path.exists(DEFAULT) else [])
    for path in named:
        try:
            read_yaml(path)
        except ConfigError as err:
            hint = "" if path.endswith(CONFIG_SUFFIXES) else (
                " (--configfile takes every word after it up to the next option: give targets before it)")
            problems.append(f"{err}{hint}")
    return problems


def main(argv: Sequence[str] | None = None,
         run: Callable[[str, list[str]], object] = os.execv) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    problems = config_problems(argv)
    if problems:
        for line in problems:
            print(f"echo-run: {line}", file=sys.stderr)
        return 2
    # the snakemake of this environment, with the arguments exactly as given
    run(sys.executable, [sys.executable, "-m", "snakemake", *argv])
    return 0   # reached only when `run` returns (tests); os.execv replaces this process


if __name__ == "__main__":
    sys.exit(main())
