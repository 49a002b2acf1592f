"""Token-sparsification policies as Python classes, one per entry of the engine's registry.

The classes are made at import time from the options each policy declares in C++ (name, type,
default, help), so a policy added to the engine appears here without binding code:

    from tokensieve.policies import OrthoRank, KVQuant, KVSink
    stack = [KVQuant(bits=2, group=128, mode="kivi"), KVSink(k=5, profile="profiles/smollm2-135m-kvsink.json")]
    str(stack[0])  # 'kvquant:bits=2,group=128,mode=kivi', the CLI's --policy spec

Options are keyword arguments; None (the default) leaves an option to the engine's default.
Values are checked when a session is made (tokensieve.Error), types here (TypeError).
"""
from __future__ import annotations

import inspect
import os
from typing import Any

from . import _tokensieve as _ext

__all__ = ["Policy", "parse", "registry"]

_PY_TYPES = {"number": float, "integer": int, "choice": str, "list": "list[int] | str",
             "path": "str | os.PathLike", "text": "str | int"}


class Policy:
    """A policy and its options; str() is the CLI spec NAME:KEY=VALUE,..."""

    name: str = ""
    _options: dict[str, dict] = {}

    def __init__(self, **options: Any):
        unknown = sorted(set(options) - set(self._options))
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown option(s) {', '.join(unknown)} "
                            f"(options: {', '.join(self._options) or 'none'})")
        self.options = {k: v for k, v in options.items() if v is not None}

    def spec(self) -> str:
        """The CLI's --policy spec."""
        items = ",".join(f"{k}={_spec_value(v)}" for k, v in self.options.items())
        return f"{self.name}:{items}" if items else self.name

    __str__ = spec

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


def _spec_value(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple, range)):
        return ",".join(str(int(x)) for x in v)
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    return str(v)


def _make_class(entry: dict) -> type:
    options = {o["key"]: o for o in entry["options"]}
    lines = [f"{entry['summary']}.", "", f"CLI: --policy {entry['name']}:{entry['usage']}", ""]
    params = []
    for o in entry["options"]:
        kind = o["type"] if o["type"] != "choice" else " | ".join(repr(c) for c in o["choices"])
        default = "" if o["default"] is None else f" (default {o['default']})"
        bounds = (f" in [{int(o['min'])}, {int(o['max'])}]" if o["type"] == "integer" else
                  f" in [{o['min']:g}, {o['max']:g}]" if "min" in o else "")
        lines.append(f"{o['key']}: {kind}{bounds}{default}. {o['help']}")
        params.append(inspect.Parameter(o["key"], inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation=_PY_TYPES[o["type"]]))
    cls = type(entry["class"], (Policy,), {"name": entry["name"], "_options": options, "__doc__": "\n".join(lines),
                                           "__module__": __name__})
    cls.__signature__ = inspect.Signature(params)
    return cls


registry: dict[str, type] = {}  # spec name -> class
for _entry in _ext.policy_registry():
    _cls = _make_class(_entry)
    registry[_entry["name"]] = _cls
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)


def parse(spec: str) -> Policy:
    """The policy object of a CLI spec, e.g. parse("kvquant:bits=4,group=32")."""
    name, _, rest = spec.partition(":")
    if name not in registry:
        raise ValueError(f"unknown policy '{name}' (known: {', '.join(registry)})")
    options: dict[str, str] = {}
    key = None
    for item in rest.split(",") if rest else []:
        if "=" in item:
            key, value = item.split("=", 1)
            options[key] = value
        elif key is not None:  # a list continues: layers=3,5,7
            options[key] += "," + item
        else:
            raise ValueError(f"policy '{spec}': '{item}' is not KEY=VALUE")
    return registry[name](**options)
