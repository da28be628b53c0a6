"""Catalog write services: the one path by which catalog rows are created and changed.

``<entity>_create`` / ``<entity>_update`` (keyword-only, HackSoftware style) validate a row — the model's own
``full_clean`` (fields and database constraints) and the rules only these services know
(:func:`catalog_rules_check`) — and save it, its many-to-many values with it, in one transaction. The admin
(``catalog.admin``: its forms show the same rules' errors on their fields, ``save_model`` calls the service),
the API (``catalog.api.views``: ``perform_create`` / ``perform_update``), the node heartbeat
(``workers.services``) and ``loadcatalog`` all write through them; tests/catalog/test_write_path.py holds a
rule to each of those doors.

Each ``<entity>_upsert`` finds its row by natural key (a slug; ``version`` for CUDA toolkits; torch
versions + variant for wheels), creates it or updates the fields that differ (through the services above),
and says which of ``created`` / ``updated`` / ``unchanged`` happened. ``catalog_load`` applies the fixture
files in dependency order inside one transaction, so bad data leaves the database as it was;
``loadcatalog`` and the tests come through here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models.deletion import ProtectedError, RestrictedError

from .models import Accelerator, Architecture, Configuration, CudaToolkit, Node, Precision, PyTorchWheel, Vendor
from .units import UnitError, parse_memory

CREATED, UPDATED, UNCHANGED = "created", "updated", "unchanged"

DEFAULT_CATALOG_DIR = Path(settings.BASE_DIR) / "fixtures" / "catalog"

_M = TypeVar("_M", bound=models.Model)  # one catalog model through an upsert


class CatalogDataError(ValueError):
    """Bad catalog data; the message names the file, the record and the field."""


@dataclass(frozen=True)
class UpsertResult:
    instance: models.Model
    action: str  # CREATED, UPDATED or UNCHANGED
    changed_fields: tuple[str, ...] = ()


@dataclass
class LoadReport:
    """What a load did, per kind (``vendors``, ``accelerators``, …)."""

    dry_run: bool = False
    created: Counter[str] = field(default_factory=Counter)
    updated: Counter[str] = field(default_factory=Counter)
    unchanged: Counter[str] = field(default_factory=Counter)
    changes: list[str] = field(default_factory=list)  # "accelerators h100-sxm-80gb: notes, tdp_watts"
    stale: dict[str, list[str]] = field(default_factory=dict)  # in the database, not in the files: kept
    deleted: dict[str, list[str]] = field(default_factory=dict)  # stale and unreferenced, with prune=True
    kept_referenced: dict[str, list[str]] = field(default_factory=dict)  # stale but referenced (PROTECT)

    def record(self, kind: str, key: str, result: UpsertResult) -> None:
        getattr(self, result.action)[kind] += 1
        if result.action == UPDATED:
            self.changes.append(f"{kind} {key}: {', '.join(result.changed_fields)}")

    @property
    def kinds(self) -> list[str]:
        seen = [*self.created, *self.updated, *self.unchanged, *self.stale]
        return [kind for kind, *_ in FILES if kind in seen]

    def lines(self) -> list[str]:
        out = []
        for kind in self.kinds:
            line = (
                f"{kind}: {self.created[kind]} created, {self.updated[kind]} updated, {self.unchanged[kind]} unchanged"
            )
            if self.stale.get(kind):
                line += f"; {len(self.stale[kind])} not in the files: {', '.join(self.stale[kind])}"
            if self.deleted.get(kind):
                line += f"; deleted {', '.join(self.deleted[kind])}"
            if self.kept_referenced.get(kind):
                line += f"; kept (referenced) {', '.join(self.kept_referenced[kind])}"
            out.append(line)
        return out


# --------------------------------------------------------------------------------------------------
# Rules beyond the model's own validation, and the one place rows are saved


def _accelerator_rules(accelerator: Accelerator) -> dict[str, str]:
    """An observed usable figure says where it was observed: the catalog's figures are traceable to a source."""
    if accelerator.usable_memory_bytes is not None and not (accelerator.usable_memory_source or "").strip():
        return {
            "usable_memory_source": (
                f"usable_memory_bytes={accelerator.usable_memory_bytes} needs a source: say where it was observed "
                "(a URL, or a node's nvidia-smi report); leave usable_memory_bytes empty to derive it from the "
                "marketed size."
            )
        }
    return {}


_RULES: dict[type[models.Model], Callable[[Any], dict[str, str]]] = {Accelerator: _accelerator_rules}


def catalog_rules_check(instance: models.Model) -> None:
    """The rules only the services enforce (``full_clean`` covers the model's own); raises ValidationError with
    each error on its field. The admin's forms call it too, so that its errors show on the form's fields."""
    errors = _RULES.get(type(instance), lambda _: {})(instance)
    if errors:
        raise ValidationError(errors)


def _split(model: type[models.Model], fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """``fields`` as (plain values, many-to-many values); a name the model cannot take is a TypeError naming it."""
    writable = _writable_fields(model)
    unknown = sorted(set(fields) - writable)
    if unknown:
        raise TypeError(
            f"{model.__name__} has no writable field(s) {', '.join(unknown)}; it has {', '.join(sorted(writable))}"
        )
    many = {f.name for f in model._meta.many_to_many}
    return (
        {name: value for name, value in fields.items() if name not in many},
        {name: list(value) for name, value in fields.items() if name in many},
    )


def _save(instance: models.Model, many: dict[str, list[Any]]) -> Any:
    with transaction.atomic():
        instance.full_clean()
        catalog_rules_check(instance)
        instance.save()
        for name, values in many.items():
            getattr(instance, name).set(values)
    return instance


def _create(model: type[models.Model], fields: dict[str, Any]) -> Any:
    values, many = _split(model, fields)
    return _save(model(**values), many)


def _update(instance: models.Model, fields: dict[str, Any]) -> Any:
    values, many = _split(type(instance), fields)
    for name, value in values.items():
        setattr(instance, name, value)
    return _save(instance, many)


def vendor_create(*, slug: str, name: str) -> Vendor:
    return _create(Vendor, {"slug": slug, "name": name})


def vendor_update(*, vendor: Vendor, **fields: Any) -> Vendor:
    return _update(vendor, fields)


def precision_create(*, slug: str, description: str = "") -> Precision:
    return _create(Precision, {"slug": slug, "description": description})


def precision_update(*, precision: Precision, **fields: Any) -> Precision:
    return _update(precision, fields)


def architecture_create(
    *, slug: str, name: str, family: str, vendor: Vendor, precisions: Iterable[Precision] = (), **fields: Any
) -> Architecture:
    """An architecture and its native precisions (``compute_capability_major/minor``, ``gfx_target`` in fields)."""
    return _create(
        Architecture,
        {"slug": slug, "name": name, "family": family, "vendor": vendor, "precisions": precisions, **fields},
    )


def architecture_update(*, architecture: Architecture, **fields: Any) -> Architecture:
    return _update(architecture, fields)


def accelerator_create(
    *, slug: str, name: str, architecture: Architecture, marketed_memory_bytes: int, source_url: str, **fields: Any
) -> Accelerator:
    """A device type; an observed ``usable_memory_bytes`` needs its ``usable_memory_source``."""
    return _create(
        Accelerator,
        {
            "slug": slug,
            "name": name,
            "architecture": architecture,
            "marketed_memory_bytes": marketed_memory_bytes,
            "source_url": source_url,
            **fields,
        },
    )


def accelerator_update(*, accelerator: Accelerator, **fields: Any) -> Accelerator:
    return _update(accelerator, fields)


def configuration_create(
    *, slug: str, name: str, vcpus: int, host_ram_bytes: int, disk_bytes: int, accelerator: Accelerator | None = None,
    **fields: Any,
) -> Configuration:  # fmt: skip
    """An orderable machine; device counts are checked against the accelerator (``Configuration.clean``)."""
    return _create(
        Configuration,
        {"slug": slug, "name": name, "accelerator": accelerator, "vcpus": vcpus, "host_ram_bytes": host_ram_bytes,
         "disk_bytes": disk_bytes, **fields},
    )  # fmt: skip


def configuration_update(*, configuration: Configuration, **fields: Any) -> Configuration:
    return _update(configuration, fields)


def cuda_toolkit_create(*, version: str, family: str, min_driver_linux: str, **fields: Any) -> CudaToolkit:
    return _create(CudaToolkit, {"version": version, "family": family, "min_driver_linux": min_driver_linux, **fields})


def cuda_toolkit_update(*, cuda_toolkit: CudaToolkit, **fields: Any) -> CudaToolkit:
    return _update(cuda_toolkit, fields)


def pytorch_wheel_create(*, torch_versions: str, variant: str, cuda_version: str, **fields: Any) -> PyTorchWheel:
    return _create(
        PyTorchWheel, {"torch_versions": torch_versions, "variant": variant, "cuda_version": cuda_version, **fields}
    )


def pytorch_wheel_update(*, pytorch_wheel: PyTorchWheel, **fields: Any) -> PyTorchWheel:
    return _update(pytorch_wheel, fields)


def node_create(*, name: str, **fields: Any) -> Node:
    """A node by name (staff in the admin or the API; its worker's first heartbeat)."""
    return _create(Node, {"name": name, **fields})


def node_update(*, node: Node, **fields: Any) -> Node:
    return _update(node, fields)


#: Each catalog model's create and update services, and the keyword its update takes the row by: how the admin
#: and the API reach the one write path without a method per entity.
WRITERS: dict[type[models.Model], tuple[Callable[..., Any], Callable[..., Any], str]] = {
    Vendor: (vendor_create, vendor_update, "vendor"),
    Precision: (precision_create, precision_update, "precision"),
    Architecture: (architecture_create, architecture_update, "architecture"),
    Accelerator: (accelerator_create, accelerator_update, "accelerator"),
    Configuration: (configuration_create, configuration_update, "configuration"),
    CudaToolkit: (cuda_toolkit_create, cuda_toolkit_update, "cuda_toolkit"),
    PyTorchWheel: (pytorch_wheel_create, pytorch_wheel_update, "pytorch_wheel"),
    Node: (node_create, node_update, "node"),
}


def catalog_row_create(model: type[models.Model], fields: Mapping[str, Any]) -> Any:
    """A row of ``model`` through its ``<entity>_create`` service."""
    create, _, _ = WRITERS[model]
    return create(**fields)


def catalog_row_update(instance: models.Model, fields: Mapping[str, Any]) -> Any:
    """``instance`` changed through its ``<entity>_update`` service."""
    _, update, keyword = WRITERS[type(instance)]
    return update(**{keyword: instance}, **fields)


# --------------------------------------------------------------------------------------------------
# Upserts (loadcatalog): the services above, for the fields that differ


def _concrete_field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    """``model``'s field ``name``; ``_split`` lets through only writable fields, never a relation's reverse side."""
    model_field = model._meta.get_field(name)
    if not isinstance(model_field, models.Field):
        raise TypeError(f"{model.__name__}.{name} is not a field of its own ({type(model_field).__name__})")
    return model_field


def _same(model_field: models.Field[Any, Any], current: Any, wanted: Any) -> bool:
    if isinstance(model_field, models.ForeignKey):
        return current == (wanted.pk if wanted is not None else None)
    if wanted is None or current is None:
        return wanted is None and current is None
    try:
        return model_field.to_python(current) == model_field.to_python(wanted)
    except ValidationError:
        return False


def _upsert(
    model: type[_M],
    lookup: dict[str, Any],
    fields: dict[str, Any],
    create: Callable[..., _M],
    update: Callable[[_M, dict[str, Any]], _M],
) -> UpsertResult:
    instance = model._default_manager.filter(**lookup).first()
    if instance is None:
        return UpsertResult(create(**lookup, **fields), CREATED)
    values, many = _split(model, fields)
    changed = [
        name
        for name, value in values.items()
        if not _same(model_field := _concrete_field(model, name), getattr(instance, model_field.attname), value)
    ]
    changed += [
        name
        for name, wanted in many.items()
        if set(getattr(instance, name).values_list("pk", flat=True)) != {v.pk for v in wanted}
    ]
    if not changed:
        return UpsertResult(instance, UNCHANGED)
    return UpsertResult(update(instance, {name: fields[name] for name in changed}), UPDATED, tuple(changed))


def vendor_upsert(*, slug: str, name: str) -> UpsertResult:
    return _upsert(Vendor, {"slug": slug}, {"name": name}, vendor_create, lambda r, f: vendor_update(vendor=r, **f))


def precision_upsert(*, slug: str, description: str = "") -> UpsertResult:
    return _upsert(
        Precision, {"slug": slug}, {"description": description}, precision_create,
        lambda r, f: precision_update(precision=r, **f),
    )  # fmt: skip


def architecture_upsert(*, slug: str, vendor: Vendor, precisions: Iterable[Precision], **fields: Any) -> UpsertResult:
    return _upsert(
        Architecture, {"slug": slug}, {"vendor": vendor, "precisions": list(precisions), **fields},
        architecture_create, lambda r, f: architecture_update(architecture=r, **f),
    )  # fmt: skip


def accelerator_upsert(*, slug: str, architecture: Architecture, **fields: Any) -> UpsertResult:
    return _upsert(
        Accelerator, {"slug": slug}, {"architecture": architecture, **fields}, accelerator_create,
        lambda r, f: accelerator_update(accelerator=r, **f),
    )  # fmt: skip


def configuration_upsert(*, slug: str, accelerator: Accelerator | None, **fields: Any) -> UpsertResult:
    return _upsert(
        Configuration, {"slug": slug}, {"accelerator": accelerator, **fields}, configuration_create,
        lambda r, f: configuration_update(configuration=r, **f),
    )  # fmt: skip


def cuda_toolkit_upsert(*, version: str, **fields: Any) -> UpsertResult:
    return _upsert(
        CudaToolkit, {"version": version}, fields, cuda_toolkit_create,
        lambda r, f: cuda_toolkit_update(cuda_toolkit=r, **f),
    )  # fmt: skip


def pytorch_wheel_upsert(*, torch_versions: str, variant: str, **fields: Any) -> UpsertResult:
    return _upsert(
        PyTorchWheel, {"torch_versions": torch_versions, "variant": variant}, fields, pytorch_wheel_create,
        lambda r, f: pytorch_wheel_update(pytorch_wheel=r, **f),
    )  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Loading fixture files

# (kind, file name, model, natural key fields, foreign keys: field → (model, kind)) in dependency order.
FILES: list[tuple[str, str, type[models.Model], tuple[str, ...], dict[str, type[models.Model]]]] = [
    ("vendors", "vendors.json", Vendor, ("slug",), {}),
    ("precisions", "precisions.json", Precision, ("slug",), {}),
    ("architectures", "architectures.json", Architecture, ("slug",), {"vendor": Vendor}),
    ("accelerators", "accelerators.json", Accelerator, ("slug",), {"architecture": Architecture}),
    ("configurations", "configurations.json", Configuration, ("slug",), {"accelerator": Accelerator}),
    ("cuda_toolkits", "cuda_toolkits.json", CudaToolkit, ("version",), {}),
    ("pytorch_wheels", "pytorch_wheels.json", PyTorchWheel, ("torch_versions", "variant"), {}),
]
_UPSERTS: dict[str, Callable[..., UpsertResult]] = {
    "vendors": vendor_upsert,
    "precisions": precision_upsert,
    "architectures": architecture_upsert,
    "accelerators": accelerator_upsert,
    "configurations": configuration_upsert,
    "cuda_toolkits": cuda_toolkit_upsert,
    "pytorch_wheels": pytorch_wheel_upsert,
}


def _writable_fields(model: type[models.Model]) -> set[str]:
    names = {f.name for f in model._meta.get_fields() if getattr(f, "editable", False) and not f.auto_created}
    names |= {f.name for f in model._meta.many_to_many}
    return names


def _natural_key(record: Mapping[str, Any], key_fields: tuple[str, ...]) -> str:
    return "/".join(str(record.get(k)) for k in key_fields)


def _condition_fields(node: Any) -> list[str]:
    """Field names a constraint's Q condition mentions (``Q(device_count__gte=1)`` → ``device_count``)."""
    names: list[str] = []
    for child in getattr(node, "children", []):
        if isinstance(child, tuple):
            names.append(child[0].split("__", 1)[0])
            if isinstance(child[1], models.F):
                # F(name) keeps its argument as .name (django/db/models/expressions.py); django-stubs 6.1 leaves it out
                names.append(child[1].name.split("__", 1)[0])  # type: ignore[attr-defined]
        else:
            names += _condition_fields(child)
    return list(dict.fromkeys(names))


def _validation_detail(exc: ValidationError, model: type[models.Model], values: Mapping[str, Any]) -> str:
    """``field: message`` pairs; a violated check constraint also names its fields and their values."""
    messages = exc.message_dict if hasattr(exc, "error_dict") else {"__all__": exc.messages}
    parts = []
    for name, msgs in messages.items():
        text = " ".join(msgs)
        if name == "__all__":
            for constraint in model._meta.constraints:
                condition = getattr(constraint, "condition", None)
                if condition is not None and constraint.name in text:
                    shown = ", ".join(f"{f}={values.get(f)!r}" for f in _condition_fields(condition))
                    text += f" ({shown})"
            parts.append(text)
        else:
            parts.append(f"{name}: {text}")
    return "; ".join(parts)


def _resolve(model: type[models.Model], slug: Any, field_name: str) -> models.Model | None:
    if slug is None:
        return None
    found = model._default_manager.filter(slug=slug).first()
    if found is None:
        known = ", ".join(model._default_manager.order_by("slug").values_list("slug", flat=True)[:50])
        raise CatalogDataError(f"{field_name}: unknown {model._meta.verbose_name} {slug!r} (known: {known or 'none'})")
    return found


def _prepare(
    kind: str, model: type[models.Model], fks: dict[str, type[models.Model]], record: Mapping[str, Any]
) -> dict[str, Any]:
    if not isinstance(record, Mapping):
        raise CatalogDataError(f"expected an object, got {type(record).__name__}")
    values = {k: v for k, v in record.items() if not k.startswith("_")}  # "_…" keys are provenance notes
    unknown = sorted(set(values) - _writable_fields(model))
    if unknown:
        raise CatalogDataError(
            f"unknown field(s) {', '.join(unknown)}; {model.__name__} has {', '.join(sorted(_writable_fields(model)))}"
        )
    for name, value in list(values.items()):
        if name.endswith("_bytes") and isinstance(value, str):
            try:
                values[name] = parse_memory(value)
            except UnitError as exc:
                raise CatalogDataError(f"{name}: {exc}") from None
    for name, fk_model in fks.items():
        if name in values:
            values[name] = _resolve(fk_model, values[name], name)
    if kind == "architectures":
        slugs = values.pop("precisions", [])
        found = {p.slug: p for p in Precision.objects.filter(slug__in=slugs)}
        missing = [s for s in slugs if s not in found]
        if missing:
            raise CatalogDataError(f"precisions: unknown precision(s) {', '.join(missing)}")
        values["precisions"] = [found[s] for s in slugs]
    return values


def catalog_read(path: Path | str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Read the fixture folder into ``{file name: records}``; a missing folder or bad JSON names the file."""
    folder = Path(path) if path else DEFAULT_CATALOG_DIR
    if not folder.is_dir():
        raise CatalogDataError(
            f"{folder}: no such catalog folder (expected the files {', '.join(f for _, f, *_ in FILES)})"
        )
    data: dict[str, list[dict[str, Any]]] = {}
    for _, name, *_ in FILES:
        file = folder / name
        if not file.exists():
            continue
        try:
            document = json.loads(file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise CatalogDataError(f"{file}: not valid JSON ({exc})") from None
        records = document.get("records") if isinstance(document, dict) else document
        if not isinstance(records, list):
            raise CatalogDataError(f"{file}: expected a list of records under 'records'")
        data[name] = records
    if not data:
        raise CatalogDataError(f"{folder}: none of the catalog files is there ({', '.join(f for _, f, *_ in FILES)})")
    return data


def _prune(kind: str, stale_rows: list[models.Model], report: LoadReport) -> None:
    for row in stale_rows:
        label = str(row)
        if isinstance(row, Precision) and row.architectures.exists():
            report.kept_referenced.setdefault(kind, []).append(label)
            continue
        try:
            with transaction.atomic():
                row.delete()
        except (ProtectedError, RestrictedError):
            report.kept_referenced.setdefault(kind, []).append(label)
        else:
            report.deleted.setdefault(kind, []).append(label)


def catalog_load(
    data: Mapping[str, Sequence[Mapping[str, Any]]], *, dry_run: bool = False, prune: bool = False
) -> LoadReport:
    """Create or update every record in ``data`` (``{file name: records}``), in one transaction.

    Rows in the database that a present file no longer lists are reported as stale and kept; with
    ``prune=True`` the unreferenced ones are deleted (referenced ones stay: catalog parents are PROTECT).
    ``dry_run=True`` does everything, reports it, and rolls back.
    """
    unknown = sorted(set(data) - {name for _, name, *_ in FILES})
    if unknown:
        raise CatalogDataError(f"unknown catalog file(s) {', '.join(unknown)}")
    report = LoadReport(dry_run=dry_run)
    with transaction.atomic():
        seen_by_kind: dict[str, set[tuple[Any, ...]]] = {}
        for kind, name, model, key_fields, fks in FILES:
            if name not in data:
                continue
            seen = seen_by_kind.setdefault(kind, set())
            for index, record in enumerate(data[name]):
                key = _natural_key(record, key_fields) if isinstance(record, Mapping) else "?"
                where = f"{name} record {index} ({key})"
                values: dict[str, Any] = {}
                try:
                    values = _prepare(kind, model, fks, record)
                    natural = tuple(values.get(k) for k in key_fields)
                    if any(v in (None, "") for v in natural):
                        raise CatalogDataError(f"missing natural key {', '.join(key_fields)}")
                    if natural in seen:
                        raise CatalogDataError("appears twice in the file")
                    seen.add(natural)
                    result = _UPSERTS[kind](**values)
                except ValidationError as exc:
                    raise CatalogDataError(f"{where}: {_validation_detail(exc, model, values)}") from None
                except CatalogDataError as exc:
                    raise CatalogDataError(f"{where}: {exc}") from None
                except (TypeError, ValueError) as exc:  # a required field missing, a value of the wrong type
                    raise CatalogDataError(f"{where}: {exc}") from None
                report.record(kind, key, result)
        # Stale rows, children first, so that pruning a configuration can free its accelerator.
        for kind, _, model, key_fields, _ in reversed(FILES):
            if kind not in seen_by_kind:
                continue
            stale_rows = [
                row
                for row in model._default_manager.order_by("pk")
                if tuple(getattr(row, k) for k in key_fields) not in seen_by_kind[kind]
            ]
            if stale_rows:
                report.stale[kind] = [_natural_key(vars(row), key_fields) for row in stale_rows]
                if prune:
                    _prune(kind, stale_rows, report)
        if dry_run:
            transaction.set_rollback(True)
    return report


def catalog_load_path(path: Path | str | None = None, *, dry_run: bool = False, prune: bool = False) -> LoadReport:
    """Read the fixture folder (default ``fixtures/catalog``) and load it with :func:`catalog_load`."""
    return catalog_load(catalog_read(path), dry_run=dry_run, prune=prune)
