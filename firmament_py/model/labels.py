"""Labels on tasks and machines, and the label selectors that constrain placements.

Labels are string key/value pairs, as in Kubernetes. A task carries a conjunction of selectors
(Kubernetes' node selector and "required" node affinity): it may only be placed on a machine
whose labels satisfy every one of them. The operators and their meaning for absent keys follow
Kubernetes' set-based requirements: `in` needs the key with one of the values (equality is `in`
with one value), `notin` is satisfied by an absent key too, `exists` and `!exists` test the key.
"""

from __future__ import annotations

import copyreg
import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

Labels = Mapping[str, str]

NO_LABELS: Labels = MappingProxyType({})


def _frozen(labels: dict[str, str]) -> MappingProxyType[str, str]:
    return MappingProxyType(labels)


def _pickle_frozen(
    labels: MappingProxyType[str, str],
) -> tuple[Callable[[dict[str, str]], MappingProxyType[str, str]], tuple[dict[str, str]]]:
    return _frozen, (dict(labels),)


# Frozen labels pickle as a copy of their dict, so that a cluster state pickles whole: the
# daemon's snapshots and the state it hands its scheduling process are pickles.
copyreg.pickle(MappingProxyType, _pickle_frozen)


def freeze_labels(labels: Mapping[str, str]) -> Labels:
    """A read-only copy of `labels`, after checking that keys are non-empty strings and values
    strings, so that events and entities cannot be changed through the caller's dict."""
    if not labels:
        return NO_LABELS  # most tasks have none: share the read-only empty map
    for key, value in labels.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"a label key must be a non-empty str, got {key!r}")
        if not isinstance(value, str):
            raise TypeError(f"label {key!r} must have a str value, got {value!r}")
    return MappingProxyType(dict(labels))


class SelectorOp(enum.Enum):
    """The operator of a label selector (spelled as in Kubernetes' selector syntax)."""

    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!exists"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """One requirement on a label: `key op values`. Values are kept sorted and distinct."""

    key: str
    op: SelectorOp
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"a selector key must be a non-empty str, got {self.key!r}")
        if not isinstance(self.op, SelectorOp):
            raise TypeError(f"a selector operator must be a SelectorOp, got {self.op!r}")
        if isinstance(self.values, str):
            raise TypeError(
                f"selector values must be a sequence of str, not the str {self.values!r}"
            )
        if any(not isinstance(value, str) for value in self.values):
            raise TypeError(f"selector values must be str, got {self.values!r}")
        values = tuple(sorted(set(self.values)))
        if self.op in (SelectorOp.IN, SelectorOp.NOT_IN) and not values:
            raise ValueError(f"selector '{self.key} {self.op.value}' needs at least one value")
        if self.op in (SelectorOp.EXISTS, SelectorOp.DOES_NOT_EXIST) and values:
            raise ValueError(f"selector '{self.key} {self.op.value}' takes no values")
        object.__setattr__(self, "values", values)

    @classmethod
    def equals(cls, key: str, value: str) -> LabelSelector:
        """`key = value`: the key is present with exactly this value."""
        return cls(key, SelectorOp.IN, (value,))

    @classmethod
    def is_in(cls, key: str, *values: str) -> LabelSelector:
        """`key in (values)`: the key is present with one of these values."""
        return cls(key, SelectorOp.IN, values)

    @classmethod
    def not_in(cls, key: str, *values: str) -> LabelSelector:
        """`key notin (values)`: the key is absent or has none of these values."""
        return cls(key, SelectorOp.NOT_IN, values)

    @classmethod
    def exists(cls, key: str) -> LabelSelector:
        """`key`: the key is present, with any value."""
        return cls(key, SelectorOp.EXISTS)

    @classmethod
    def does_not_exist(cls, key: str) -> LabelSelector:
        """`!key`: the key is absent."""
        return cls(key, SelectorOp.DOES_NOT_EXIST)

    def matches(self, labels: Labels) -> bool:
        """True if `labels` satisfy this requirement."""
        value = labels.get(self.key)
        if self.op is SelectorOp.IN:
            return value is not None and value in self.values
        if self.op is SelectorOp.NOT_IN:
            return value is None or value not in self.values
        if self.op is SelectorOp.EXISTS:
            return value is not None
        return value is None

    def __str__(self) -> str:
        if self.op is SelectorOp.EXISTS:
            return self.key
        if self.op is SelectorOp.DOES_NOT_EXIST:
            return f"!{self.key}"
        if self.op is SelectorOp.IN and len(self.values) == 1:
            return f"{self.key}={self.values[0]}"
        return f"{self.key} {self.op.value} ({','.join(self.values)})"


def matches(selectors: Iterable[LabelSelector], labels: Labels) -> bool:
    """True if `labels` satisfy every selector (an empty conjunction matches everything)."""
    return all(selector.matches(labels) for selector in selectors)


def check_selectors(selectors: Iterable[LabelSelector]) -> tuple[LabelSelector, ...]:
    """`selectors` as a tuple, after checking that each is a `LabelSelector`."""
    checked = tuple(selectors)
    for selector in checked:
        if not isinstance(selector, LabelSelector):
            raise TypeError(f"expected a LabelSelector, got {selector!r}")
    return checked
