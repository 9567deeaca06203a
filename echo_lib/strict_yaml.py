"""YAML that refuses a key given twice. PyYAML keeps the last of two equal keys without a word, so a
pasted-twice field of a scenario (or config) would silently replace the first; here it is an error that
names both lines."""
from __future__ import annotations

from typing import Any

import yaml


class DuplicateKeyError(yaml.constructor.ConstructorError):
    pass


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":   # `<<: *anchor` may be overridden on purpose
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKeyError(None, None, f"key {key!r} appears twice (lines {seen[key]} and {line})",
                                        key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def safe_load(text: str) -> Any:
    """yaml.safe_load, but a mapping with a key given twice raises DuplicateKeyError (a yaml.YAMLError)."""
    return yaml.load(text, Loader=_StrictLoader)   # noqa: S506  (a SafeLoader subclass)
