"""Build kio entities from keyword fields, forgiving version differences.

Rules:
- `build(api_key, version, class_name, **fields)` makes the response entity (top level or
  nested) named `class_name` in that version's kio response module; `build_request` the
  same from the request module (a broker speaking to another broker). Keyword fields the
  version does not have are DROPPED, fields the caller leaves out get their schema default or,
  when the schema has none, a zero value: 0, "", None for nullable fields, () for arrays,
  False, timedelta(0), the zero UUID, a zero entity for nested entities. So a handler builds
  one internal result and passes the union of every version's field names; each version
  keeps what it knows. (A misspelt field name is dropped too: tests must check the bytes.)
- Conversions done here so handlers can pass plain numbers: error codes (int or
  `replicas.errors` codes) become kio `ErrorCode` (kio's writer needs `.value`); ints for
  duration fields (`throttle_time`, `timeout`) are milliseconds; `throttle_time_ms=` is
  accepted for `throttle_time`; ints for timestamp fields (`log_append_time`) are epoch
  milliseconds, negative meaning null (-1). None for a field this version cannot null
  (Metadata's topic name is nullable from v12 only) becomes that field's zero value.
  The other way, `millis` reads a decoded duration field (kio's timedelta) as milliseconds.
- The versions kio has no schema for (protocol/legacy.py: Produce v0-2, Fetch v0-3, ...)
  are built by `legacy.response` under the same rules, so handlers need not know which
  versions kio has.
- Everything per class is computed once and cached; `build` costs a dict lookup per field.
  `pair_entity` caches whole entities of the two-field nested classes every partition of
  a Fetch or Produce answer carries (kio entities are frozen: one object serves all).
- Pure: imports kio, protocol/legacy.py and the stdlib only.
"""

from __future__ import annotations

import datetime
import functools
import uuid
from dataclasses import MISSING, fields as dataclass_fields, is_dataclass
from types import ModuleType

from kio.index import KioIndexError, load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial._introspect import classify_field, is_optional
from kio.serial.readers import tz_aware_from_i64
from kio.static.constants import EntityType

from . import legacy
from .errors import NoResponseSchema

__all__ = ["build", "build_request", "build_entity", "response_module", "response_class",
           "request_class", "error_code", "millis",
           "zero_value"]

_EPOCH = tz_aware_from_i64(0)
_ZERO_DELTA = datetime.timedelta(0)
# Most specific first: bool before int (bool is an int), ErrorCode before int.
_ZEROS: tuple[tuple[type, object], ...] = (
    (ErrorCode, ErrorCode.none),
    (bool, False),
    (int, 0),
    (float, 0.0),
    (str, ""),
    (bytes, b""),
    (datetime.datetime, _EPOCH),
    (datetime.timedelta, _ZERO_DELTA),
    (uuid.UUID, uuid.UUID(int=0)),
)


class _RawCode(int):
    """An error code kio's enum does not know: kio's writer only needs `.value`."""

    @property
    def value(self) -> int:
        return int(self)


_CODES: dict[int, ErrorCode | _RawCode] = {int(c): c for c in ErrorCode}


def error_code(code) -> ErrorCode | _RawCode:
    """kio's ErrorCode for an int (or a KafkaError class/instance carrying `.code`)."""
    if isinstance(code, ErrorCode):
        return code
    code = getattr(code, "code", code)
    found = _CODES.get(code)
    if found is None:
        found = _CODES[code] = _RawCode(code)
    return found


def _to_timedelta(value):
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=value)


def millis(value) -> int:
    """A duration field of a decoded request (kio: timedelta; an int passes) in ms."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _to_datetime(value):
    if value is None or isinstance(value, datetime.datetime):
        return value
    return None if value < 0 else tz_aware_from_i64(value)


def zero_value(field_type: type):
    if is_dataclass(field_type):
        return build_entity(field_type)
    for base, zero in _ZEROS:
        if issubclass(field_type, base):
            return zero
    raise TypeError(f"no zero value for {field_type!r}")


class _Spec:
    """What `build_entity` needs to know about one kio class, computed once."""

    __slots__ = ("names", "required", "convert", "zero_for_none", "plain")

    def __init__(self, cls: type):
        self.names: frozenset[str] = frozenset(f.name for f in dataclass_fields(cls))
        self.required: list[tuple[str, object]] = []
        self.convert: dict[str, object] = {}
        self.zero_for_none: dict[str, object] = {}
        for f in dataclass_fields(cls):
            kind = classify_field(f)
            inner = kind.type_
            if not kind.is_array:
                if issubclass(inner, ErrorCode):
                    self.convert[f.name] = error_code
                elif issubclass(inner, datetime.timedelta):
                    self.convert[f.name] = _to_timedelta
                elif issubclass(inner, datetime.datetime):
                    self.convert[f.name] = _to_datetime
            optional = is_optional(f)
            if f.default is not MISSING:
                fallback = f.default
            elif optional:
                fallback = None
            else:
                fallback = () if kind.is_array else zero_value(inner)
            if not optional:
                self.zero_for_none[f.name] = fallback
            if f.default is MISSING and f.default_factory is MISSING:
                self.required.append((f.name, fallback))
        # taken as given unless None: no conversion
        self.plain: frozenset[str] = self.names - self.convert.keys()


_SPECS: dict[type, _Spec] = {}


def build_entity(cls: type, /, **fields):
    """Any kio entity class (request, response or nested) from keyword fields, as `build`."""
    spec = _SPECS.get(cls)
    if spec is None:
        spec = _SPECS[cls] = _Spec(cls)
    names, plain = spec.names, spec.plain
    kwargs = {}
    for name, value in fields.items():
        if value is not None and name in plain:
            kwargs[name] = value
        elif name in names:
            if value is None:
                value = spec.zero_for_none.get(name)
            fix = spec.convert.get(name)
            kwargs[name] = value if fix is None else fix(value)
        elif name == "throttle_time_ms" and "throttle_time" in names:
            kwargs["throttle_time"] = _to_timedelta(value)
    if len(kwargs) < len(names):        # some field not given: its zero
        for name, zero in spec.required:
            if name not in kwargs:
                kwargs[name] = zero
    return cls(**kwargs)


_MODULES: dict[tuple[int, int, EntityType], ModuleType] = {}
_CLASSES: dict[tuple[int, int, str | None, EntityType], type] = {}


def response_module(api_key: int, version: int,
                    kind: EntityType = EntityType.response) -> ModuleType:
    """kio's response (or request) module for (api_key, version); NoResponseSchema if there
    is none."""
    key = (api_key, version, kind)
    module = _MODULES.get(key)
    if module is None:
        try:
            module = load_payload_module(api_key, version, kind)
        except KioIndexError:
            raise NoResponseSchema(f"no kio {kind.name} schema", api_key=api_key,
                                   api_version=version) from None
        _MODULES[key] = module
    return module


def response_class(api_key: int, version: int, class_name: str | None = None,
                   kind: EntityType = EntityType.response) -> type:
    """The top-level response (or request) class (class_name None) or a nested one."""
    key = (api_key, version, class_name, kind)
    cls = _CLASSES.get(key)
    if cls is None:
        module = response_module(api_key, version, kind)
        if class_name is None:
            found = [c for c in vars(module).values() if isinstance(c, type)
                     and getattr(c, "__type__", None) is kind]
            if len(found) != 1:
                raise NoResponseSchema(f"no top-level {kind.name} class", api_key=api_key,
                                       api_version=version)
            cls = found[0]
        else:
            cls = getattr(module, class_name, None)
            if not (isinstance(cls, type) and is_dataclass(cls)):
                raise KeyError(f"{module.__name__} has no entity class {class_name!r}")
        _CLASSES[key] = cls
    return cls


def request_class(api_key: int, version: int, class_name: str | None = None) -> type:
    """The top-level request class (class_name None) or a nested one, for a caller that
    makes its entities directly with every field (a follower's Fetch, each round)."""
    return response_class(api_key, version, class_name, EntityType.request)


def build(api_key: int, version: int, class_name: str | None = None, /, **fields):
    """A response entity of that version: `class_name` None or the top-level class name gives
    the response itself, a nested class name gives that nested entity."""
    cls = _CLASSES.get((api_key, version, class_name, EntityType.response))
    if cls is None:
        if legacy.has_response(api_key, version):
            return legacy.response(api_key, version, class_name, **fields)
        cls = response_class(api_key, version, class_name)
    return build_entity(cls, **fields)


def build_request(api_key: int, version: int, class_name: str | None = None, /, **fields):
    """A request entity of that version (top level or nested), as `build` does responses."""
    cls = _CLASSES.get((api_key, version, class_name, EntityType.request))
    if cls is None:
        cls = response_class(api_key, version, class_name, EntityType.request)
    return build_entity(cls, **fields)


_PAIR_FIELDS = {"EpochEndOffset": ("epoch", "end_offset"),
                "LeaderIdAndEpoch": ("leader_id", "leader_epoch"),
                "SnapshotId": ("end_offset", "epoch")}


@functools.lru_cache(maxsize=4096)
def pair_entity(api_key: int, version: int, class_name: str, first: int, second: int):
    """A two-field nested response entity (EpochEndOffset, LeaderIdAndEpoch, SnapshotId),
    made once: nearly every partition of an answer carries the same ones (no diverging
    epoch, no snapshot, its leader)."""
    names = _PAIR_FIELDS[class_name]
    return build(api_key, version, class_name, **{names[0]: first, names[1]: second})
