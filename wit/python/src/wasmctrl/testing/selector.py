"""Kubernetes label selectors (``app=web,tier in (a,b),!legacy``), parsed
and matched as apimachinery's ``labels.Parse`` does, so the test
:class:`~wasmctrl.testing.World` admits to a watch only what the API server
would. Set-based and equality-based requirements; a selector that does not
parse is an error naming the problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_KEY = r"(?:[a-z0-9A-Z.\-]*/)?[a-z0-9A-Z](?:[a-z0-9A-Z_.\-]*[a-z0-9A-Z])?"
_VALUE = r"(?:[a-z0-9A-Z](?:[a-z0-9A-Z_.\-]*[a-z0-9A-Z])?)?"
_TOKEN = re.compile(
    rf"\s*(?:(?P<not>!)\s*(?P<nkey>{_KEY})"
    rf"|(?P<key>{_KEY})\s*(?:(?P<op>==|=|!=)\s*(?P<value>{_VALUE})"
    rf"|\s(?P<setop>in|notin)\s*\((?P<set>[^)]*)\))?)\s*(?:,|$)"
)


class SelectorError(ValueError):
    """A label selector that does not parse."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        has, value = self.key in labels, labels.get(self.key)
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        if self.op in ("=", "in"):
            return has and value in self.values
        return not has or value not in self.values


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...]

    @staticmethod
    def parse(text: str) -> "LabelSelector":
        reqs, at = [], 0
        if not text.strip():
            return LabelSelector(())
        while at < len(text):
            m = _TOKEN.match(text, at)
            if m is None or m.end() == at:
                raise SelectorError(f"cannot parse label selector {text!r} at {text[at:]!r}")
            at = m.end()
            if m["nkey"]:
                reqs.append(Requirement(m["nkey"], "!"))
            elif m["op"]:
                reqs.append(Requirement(m["key"], "!=" if m["op"] == "!=" else "=", frozenset([m["value"]])))
            elif m["setop"]:
                values = [v.strip() for v in m["set"].split(",")]
                if any(not re.fullmatch(_VALUE, v) for v in values):
                    raise SelectorError(f"invalid value in label selector {text!r}")
                reqs.append(Requirement(m["key"], m["setop"], frozenset(values)))
            else:
                reqs.append(Requirement(m["key"], "exists"))
        return LabelSelector(tuple(reqs))

    def matches(self, labels: dict[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)
