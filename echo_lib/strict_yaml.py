"""YAML that refuses what a hand-written config or scenario never needs and a hostile one can abuse.

PyYAML's safe_load keeps the last of two equal keys without a word, expands aliases without limit (a
few hundred bytes of `&a [*a, *a, ...]` become hundreds of megabytes, then a message that quotes them),
recurses once per nesting level (a RecursionError traceback), fails with a TypeError on a list used as a
key, and makes dates, bytes and sets no JSON can hold. Here each of these is a yaml.YAMLError that names
the line and what to write instead (read_yaml and the scenario reader add the file):

- a key given twice (DuplicateKeyError, naming both lines);
- aliases (`*name`) that would expand to more than MAX_ALIAS_NODES nodes or MAX_ALIAS_TEXT characters in
  all, or to the node they sit in (a structure without end); a few `<<: *defaults` merges stay allowed;
- nesting deeper than MAX_DEPTH;
- a key that is not plain text or a number (a list or mapping used as a key);
- explicit tags other than JSON's (!!binary, !!set, !!timestamp, !!omap, !!pairs); an unquoted date
  such as 2024-01-01 stays text.

read_text(path) reads a file for it: a regular file of at most MAX_BYTES, never opening a FIFO or a
device (which could block forever); anything else is a FileRefused naming the file and the fix.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 1 << 20          # 1 MiB: a config is ~10 kB, a scenario ~5 kB, the largest data file ~80 kB
MAX_ALIAS_NODES = 10_000     # nodes all aliases together may expand to (a merge of 20 keys is ~41)
MAX_ALIAS_TEXT = 1 << 16     # characters of text they may repeat (one alias of a long text is many bytes)
MAX_DEPTH = 64               # nesting levels (the deepest config is 6)
MAX_PROBLEM = 200            # characters of a problem text quoted from PyYAML (a name in it may be long)
_JSON_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map", "merge")}


class DuplicateKeyError(yaml.constructor.ConstructorError):
    pass


class UnsafeYAMLError(yaml.MarkedYAMLError):
    """Input this reader refuses: too many alias expansions, a recursive alias, too deep a nesting,
    a non-scalar key, a tag that makes something other than JSON data."""


class FileRefused(OSError):
    """A path that is not a regular file of a readable size; `problem` and `fix` are for the message."""

    def __init__(self, path: str | Path, problem: str, fix: str):
        self.path, self.problem, self.fix = str(path), problem, fix
        super().__init__(f"{path} {problem}; {fix}")

    def __str__(self) -> str:
        return f"{self.path} {self.problem}; {self.fix}"


def _kind(mode: int) -> str | None:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def read_text(path: str | Path, max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of a regular file of at most max_bytes. A folder, FIFO, device or socket is refused
    without being opened (a FIFO would block until someone writes to it); so is a larger file. Raises
    FileRefused (an OSError), another OSError (missing, no permission) or UnicodeDecodeError."""
    fix = "replace it with a regular YAML file, or name one"
    kind = _kind(os.stat(path).st_mode)           # follows a symlink to what it names
    if kind:
        raise FileRefused(path, f"is {kind}, not a regular file", fix)
    # O_NONBLOCK: should the path have become a FIFO since the stat, opening it still returns at once
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        kind = _kind(os.fstat(f.fileno()).st_mode)
        if kind:
            raise FileRefused(path, f"is {kind}, not a regular file", fix)
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileRefused(path, f"is larger than {max_bytes} bytes, more than a YAML file here ever needs",
                          "check that it is the file you meant (a config is about 10 kB)")
    return data.decode("utf-8")


def _without_timestamps(resolvers: dict) -> dict:
    return {first: [(tag, rx) for tag, rx in pairs if tag != "tag:yaml.org,2002:timestamp"]
            for first, pairs in resolvers.items()}


class _StrictLoader(yaml.SafeLoader):
    yaml_implicit_resolvers = _without_timestamps(yaml.SafeLoader.yaml_implicit_resolvers)

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._open: set[str] = set()          # anchors of the nodes being composed (an alias to one recurses)
        self._alias_nodes = self._alias_text = 0
        self._sizes: dict[int, tuple[int, int]] = {}

    # --- composing: aliases and depth -------------------------------------------------------------
    def _size(self, node: yaml.Node) -> tuple[int, int]:
        """Nodes and characters of text under `node`, every alias in it expanded (memoised: a bomb costs what
        it takes to write, not what it expands to)."""
        key = id(node)
        if key not in self._sizes:
            if isinstance(node, yaml.ScalarNode):
                self._sizes[key] = (1, len(node.value))
            else:
                children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) \
                    else node.value
                sizes = [self._size(c) for c in children]
                self._sizes[key] = (1 + sum(n for n, _ in sizes), sum(t for _, t in sizes))
        return self._sizes[key]

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open:
                raise UnsafeYAMLError(None, None, f"alias *{event.anchor[:40]} sits inside the node it names "
                                      "names (a structure without end); write the values out",
                                      event.start_mark)
            node = self.anchors.get(event.anchor)
            if node is not None:
                nodes, text = self._size(node)
                self._alias_nodes += nodes
                self._alias_text += text
                if self._alias_nodes > MAX_ALIAS_NODES or self._alias_text > MAX_ALIAS_TEXT:
                    raise UnsafeYAMLError(None, None, f"aliases (*{event.anchor[:40]} and the ones before it) "
                                          f"repeat more than {MAX_ALIAS_NODES} values or {MAX_ALIAS_TEXT} characters; "
                                          "write the values out instead of repeating them by alias",
                                          event.start_mark)
            return super().compose_node(parent, index)
        if self._depth >= MAX_DEPTH:
            raise UnsafeYAMLError(None, None, f"nesting is deeper than {MAX_DEPTH} levels; a config or scenario "
                                  "is a few levels deep: check the brackets and indentation", event.start_mark)
        anchor = event.anchor
        self._depth += 1
        if anchor is not None:
            self._open.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            self._open.discard(anchor)

    # --- constructing: keys and tags ----------------------------------------------------------------
    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":   # `<<: *anchor` may be overridden on purpose
                continue
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                what = "a list" if isinstance(key_node, yaml.SequenceNode) else "a mapping"
                raise UnsafeYAMLError(None, None, f"a key on line {line} is {what}; a key must be plain text "
                                      "(put the key's name before the colon, the list or mapping after it)",
                                      key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise DuplicateKeyError(None, None, f"key {key!r} appears twice (lines {seen[key]} and {line})",
                                        key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_non_json(self, node):
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")[:60]
        raise UnsafeYAMLError(None, None, f"the tag {tag} makes a value that is not text, a number, true/false, "
                              "null, a list or a mapping; remove the tag (quote the value to keep it as text)",
                              node.start_mark)


_StrictLoader.yaml_constructors = dict(yaml.SafeLoader.yaml_constructors)
for _tag in list(_StrictLoader.yaml_constructors):
    if _tag is not None and _tag not in _JSON_TAGS:
        _StrictLoader.yaml_constructors[_tag] = _StrictLoader.construct_non_json
_StrictLoader.yaml_constructors[None] = _StrictLoader.construct_non_json   # an unknown !tag


def _short(text: Any) -> Any:
    if isinstance(text, str) and len(text) > MAX_PROBLEM:
        return text[:MAX_PROBLEM] + f"... ({len(text)} characters)"
    return text


def safe_load(text: str) -> Any:
    """yaml.safe_load with the refusals above (each a yaml.YAMLError); problem texts are kept short."""
    if len(text) > MAX_BYTES:
        raise UnsafeYAMLError(None, None, f"the text is {len(text)} characters, more than the {MAX_BYTES} a YAML "
                              "file here ever needs", None)
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as err:   # a problem may quote a long name (an alias, a tag): keep it short
        err.problem, err.context = _short(err.problem), _short(err.context)
        raise
    finally:
        loader.dispose()
