"""`@dataclass` and `field` for rewind's plain records, without the `dataclasses` module, and
`record`, a named tuple type without `collections.namedtuple`'s cost.

Every hook pays for its imports: `dataclasses` pulls in `inspect`, `ast` and `dis` (6 ms
here) and takes about 0.5 ms per class, where the hook's whole budget is a few times
`python -c pass`. Records here need only what this module gives: fields in annotation
order with defaults or default factories, `__init__`, `__repr__`, `__eq__`, and for
`frozen=True` immutability and `__hash__`. Annotations are never evaluated.
"""

from __future__ import annotations

_MISSING = object()


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


def field(*, default_factory):
    """A default made anew for each instance (a list, a dict)."""
    return _Factory(default_factory)


def _frozen_setattr(self, name, value):
    raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name}")


def _build(cls, frozen: bool):
    names: list[str] = []
    for klass in reversed(cls.__mro__[:-1]):          # inherited fields first, as dataclasses does
        for name in klass.__dict__.get("__annotations__", {}):
            if name not in names:
                names.append(name)
    env = {"_MISSING": _MISSING, "_set": object.__setattr__}
    args, body = [], []
    for name in names:
        default = cls.__dict__.get(name, _MISSING)
        if isinstance(default, (classmethod, staticmethod, property)) or callable(default):
            raise TypeError(f"{cls.__name__}.{name}: a method of that name shadows the field")
        if isinstance(default, _Factory):
            env[f"_f_{name}"] = default.make
            args.append(f"{name}=_MISSING")
            value = f"_f_{name}() if {name} is _MISSING else {name}"
            delattr(cls, name)
        elif default is not _MISSING:
            env[f"_d_{name}"] = default
            args.append(f"{name}=_d_{name}")
            value = name
        else:
            if args and "=" in args[-1]:
                raise TypeError(f"{cls.__name__}.{name}: a field without a default follows one with a default")
            args.append(name)
            value = name
        body.append(f"  _set(self, {name!r}, {value})" if frozen else f"  self.{name} = {value}")
    src = f"def __init__(self, {', '.join(args)}):\n" + ("\n".join(body) or "  pass") + "\n"
    exec(src, env)
    cls.__init__ = env["__init__"]
    cls.__match_args__ = tuple(names)
    cls._fields = tuple(names)
    fields = tuple(names)

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in fields) + ")"

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in fields)

    cls.__repr__, cls.__eq__ = __repr__, __eq__
    if frozen:
        cls.__setattr__ = _frozen_setattr
        cls.__delattr__ = _frozen_setattr
        cls.__hash__ = lambda self: hash(tuple(getattr(self, n) for n in fields))
    else:
        cls.__hash__ = None
    return cls


def dataclass(cls=None, *, frozen: bool = False):
    if cls is None:
        return lambda c: _build(c, frozen)
    return _build(cls, frozen)


def replace(obj, **changes):
    """A copy of `obj` (one of these dataclasses) with `changes`."""
    return type(obj)(**{**{n: getattr(obj, n) for n in obj._fields}, **changes})


try:
    from _collections import _tuplegetter as named_field    # namedtuple's own field getter, in C
except ImportError:                                          # pragma: no cover - another Python
    from operator import itemgetter as _itemgetter

    def named_field(index: int, doc: str):
        return property(_itemgetter(index), doc=doc)


def record(name: str, fields: str, doc: str, defaults: tuple = ()) -> type:
    """A named tuple type, as collections.namedtuple makes, without its `exec`: a type costs
    0.02 ms to make here where namedtuple's costs 0.2 ms, and every hook makes them all. Its
    fields read by name; `_make(row)` builds one straight from a cursor's row (tuple.__new__,
    no Python call: the catalog makes thousands); called with fields, `defaults` fill the
    last ones; `_fields`, `_asdict()`, `_replace()`, a repr, and a tuple's equality."""
    import sys
    names = tuple(fields.split())
    n, first_default = len(names), len(names) - len(defaults)

    def __new__(cls, *args, **kw):
        if len(args) == n and not kw:
            return tuple.__new__(cls, args)
        if len(args) > n:
            raise TypeError(f"{name}() takes {n} fields, {len(args)} given")
        values = list(args)
        for i in range(len(args), n):
            if names[i] in kw:
                values.append(kw.pop(names[i]))
            elif i >= first_default:
                values.append(defaults[i - first_default])
            else:
                raise TypeError(f"{name}() lacks the field {names[i]!r}")
        if kw:
            raise TypeError(f"{name}() has no field {next(iter(kw))!r}")
        return tuple.__new__(cls, values)

    def __repr__(self):
        return f"{name}(" + ", ".join(f"{f}={v!r}" for f, v in zip(names, self)) + ")"

    def _asdict(self) -> dict:
        return dict(zip(names, self))

    def _replace(self, **kw):
        out = tuple.__new__(type(self), [kw.pop(f, v) for f, v in zip(names, self)])
        if kw:
            raise TypeError(f"{name} has no field {next(iter(kw))!r}")
        return out

    ns = {"__doc__": doc, "__slots__": (), "__module__": sys._getframe(1).f_globals.get("__name__", __name__),
          "_fields": names, "_make": classmethod(tuple.__new__), "__new__": __new__, "__repr__": __repr__,
          "__getnewargs__": lambda self: tuple(self), "_asdict": _asdict, "_replace": _replace}
    for i, f in enumerate(names):
        ns[f] = named_field(i, f"field {i}: {f}")
    return type(name, (tuple,), ns)
