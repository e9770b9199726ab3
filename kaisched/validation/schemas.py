"""The schemas objects are checked against: the OpenAPI schemas of one
Kubernetes version bundled by `kubernetes-validate` (the newest it bundles,
unless another is chosen with use_kube_version; each version's own kinds and
pod fields, the Workload API's included: 1.35's Workload and workloadRef,
1.36's and 1.37's PodGroups and schedulingGroup), kaisched's CRDs in
config/crds, and the CRDs of other schedulers whose objects kaisched reads
(kaisched/validation/crds: KAI's, each file saying where it came from), all
refusing unknown fields as `kubectl apply`'s strict field validation does."""
from __future__ import annotations

import functools
import importlib.resources
import re
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import jsonschema
import orjson
import yaml
from referencing import Registry, Resource

from kaisched.api import workloadkinds
from kaisched.cluster.kinds import KAI_TOPOLOGY, KOORD_PODGROUP, XK8S_PODGROUP
from kaisched.errors import InputError


def available_versions() -> list[str]:
    """The Kubernetes versions whose strict schemas kubernetes-validate bundles, oldest first."""
    root = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    found = []
    for entry in root.iterdir():
        match = re.fullmatch(r"v(\d+)\.(\d+)\.0-local-strict", entry.name)
        if match and entry.is_dir():
            found.append((int(match[1]), int(match[2])))
    return [f"{a}.{b}" for a, b in sorted(found)]


# The newest bundled: the kinds of recent versions (the upstream gang API) are known.
KUBERNETES_VERSION = available_versions()[-1] if available_versions() else "1.32"
_CURRENT = [KUBERNETES_VERSION]


def kube_version() -> str:
    """The Kubernetes version objects are checked against now."""
    return _CURRENT[0]


def use_kube_version(version: str) -> None:
    """Check objects against another bundled Kubernetes version from now on."""
    version = version.removeprefix("v")
    if version.count(".") == 2 and version.endswith(".0"):
        version = version[:-2]
    known = available_versions()
    if version not in known:
        raise InputError(f"kube-version {version}: kubernetes-validate bundles no schemas of it "
                         f"(it bundles {', '.join(known)})")
    if version != _CURRENT[0]:
        _CURRENT[0] = version
        for cached in (_schemas_dir, _registry, builtin, object_meta, read_without_schema):
            cached.cache_clear()
        _SCHEMA_MEMO.clear()
Obj = Mapping[str, Any]
Found = list[tuple[str, str]]     # (field, rule)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def schema_errors(validator: jsonschema.protocols.Validator, value: Any,
                  prefix: str = "") -> Found:
    """(field, rule) for every way `value` breaks the schema; metadata is checked under `prefix`."""
    if value is None:
        return []
    key = _memo_key(value) if not prefix else None
    if key is not None:
        cached = _SCHEMA_MEMO.get((id(validator), key))
        if cached is not None:
            return cached
    out = []
    for error in sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path))):
        path = _path([prefix, *error.absolute_path] if prefix else list(error.absolute_path))
        out.append((path or "(object)", _message(error)))
    if key is not None and len(_SCHEMA_MEMO) < 100_000:
        _SCHEMA_MEMO[(id(validator), key)] = out
    return out


# Replayed snapshots hold thousands of pods made from a few templates: the schema
# verdict of an object does not depend on the strings that identify it.
_SCHEMA_MEMO: dict[tuple[int, bytes], list[tuple[str, str]]] = {}
_IDENTITY_FIELDS = ("name", "generateName", "uid", "resourceVersion", "creationTimestamp")
# Strings every running pod (or owner reference) has its own of, and no schema constrains
# beyond "a string".
_FREE_TEXT = frozenset({"lastTransitionTime", "lastProbeTime", "startTime", "startedAt",
                        "finishedAt", "lastHeartbeatTime", "podIP", "hostIP", "ip",
                        "containerID", "imageID", "message", "uid", "name"})


def _blank_free_text(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: ("" if k in _FREE_TEXT and isinstance(v, str) else _blank_free_text(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_blank_free_text(v) for v in node]
    return node


def _memo_key(value: Any) -> bytes | None:
    if not isinstance(value, Mapping) or not isinstance(value.get("metadata"), Mapping):
        return None
    meta: dict[str, Any] = {k: ("" if k in _IDENTITY_FIELDS and isinstance(v, str) else v)
            for k, v in value["metadata"].items()}
    for field in ("labels", "annotations"):         # values: any string
        if isinstance(meta.get(field), Mapping):
            meta[field] = {k: "" if isinstance(v, str) else v for k, v in meta[field].items()}
    if isinstance(meta.get("ownerReferences"), list):
        meta["ownerReferences"] = [_blank_free_text(ref) for ref in meta["ownerReferences"]]
    out = {**value, "metadata": meta}
    spec = value.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("nodeName"), str):
        out["spec"] = {**spec, "nodeName": ""}
    if "status" in value:
        out["status"] = _blank_free_text(value["status"])
    try:
        return orjson.dumps(out, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator in ("oneOf", "anyOf") and error.context:
        types = sorted({str(c.schema.get("type")) for c in error.context if "type" in c.schema})
        if types:
            return f"{error.instance!r} is not one of the accepted types ({', '.join(types)})"
    if error.validator == "additionalProperties" and error.validator_value is False:
        extra = sorted(set(error.instance) - set(error.schema.get("properties") or {}))
        return f"unknown field{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}"
    return error.message


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part:
            out += f".{part}" if out else str(part)
    return out


@functools.cache
def _schemas_dir() -> importlib.resources.abc.Traversable:
    # The -strict variant refuses unknown fields.
    path = (importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
            / f"v{kube_version()}.0-local-strict")
    if not path.is_dir():
        raise InputError(f"the installed kubernetes-validate bundles no schemas of Kubernetes "
                         f"{kube_version()}; install the version setup.cfg names")
    return path


@functools.cache
def _registry() -> tuple[Registry, dict[str, Any]]:
    definitions = orjson.loads((_schemas_dir() / "_definitions.json").read_bytes())
    return Resource.from_contents(definitions) @ Registry(), definitions


def is_builtin_group(group: str) -> bool:
    """Groups the Kubernetes API itself serves: core, the dot-less ones, *.k8s.io."""
    return "." not in group or group.endswith(".k8s.io")


@functools.cache
def builtin(api: str, kind: str) -> jsonschema.protocols.Validator | None:
    # kubernetes-validate names its files <kind>-<first label of the group>-<version>.json
    short = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api)
    path = _schemas_dir() / f"{kind.lower()}-{short}.json"
    if not path.is_file():
        return None
    schema = orjson.loads(path.read_bytes())
    props = schema.get("properties") or {}
    if api not in (props.get("apiVersion") or {}).get("enum", ()) \
            or kind not in (props.get("kind") or {}).get("enum", ()):
        return None
    registry, _ = _registry()
    return jsonschema.Draft202012Validator(schema, registry=Resource.from_contents(schema) @ registry)


@functools.cache
def object_meta() -> jsonschema.protocols.Validator:
    registry, definitions = _registry()
    ref = {"$ref": f"{definitions['$id']}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    return jsonschema.Draft202012Validator(ref, registry=registry)


def crd_dir() -> Path:
    """config/crds of the checkout, else where setup.cfg's data_files put it."""
    for candidate in (Path(__file__).resolve().parents[2] / "config" / "crds",
                      Path(sys.prefix) / "share" / "kaisched" / "crds"):
        if candidate.is_dir():
            return candidate
    raise InputError("cannot check kaisched objects: the CRD manifests (config/crds) are not installed")


def _crd_texts() -> Iterable[str]:
    """kaisched's CRD manifests, then the other schedulers' bundled here."""
    for path in sorted(crd_dir().glob("*.yaml")):
        yield path.read_text(encoding="utf-8")
    bundled = importlib.resources.files("kaisched.validation") / "crds"
    for entry in sorted(bundled.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            yield entry.read_text(encoding="utf-8")


def _crd_versions() -> Iterator[tuple[tuple[str, str], str, Any]]:
    """(apiVersion, kind), API group and openAPIV3Schema (as written, with its
    x-kubernetes-validations rules) of every version the CRDs serve."""
    for text in _crd_texts():
        for doc in yaml.load_all(text, Loader=_Loader):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if version.get("served", True):
                    yield ((f"{spec['group']}/{version['name']}", spec["names"]["kind"]),
                           spec["group"], version["schema"]["openAPIV3Schema"])


@functools.cache
def crds() -> dict[str, dict[tuple[str, str], jsonschema.protocols.Validator]]:
    """Per API group, a validator per (apiVersion, kind) served by the CRDs."""
    out: dict[str, dict[tuple[str, str], jsonschema.protocols.Validator]] = {}
    for key, group, schema in _crd_versions():
        out.setdefault(group, {})[key] = jsonschema.Draft4Validator(_closed(schema))
    return out


@functools.cache
def crd_schemas() -> dict[tuple[str, str], Any]:
    """The openAPIV3Schema of each (apiVersion, kind) the CRDs serve, as written
    (with their x-kubernetes-validations rules)."""
    return {key: schema for key, _, schema in _crd_versions()}


def _closed(node: Any) -> Any:
    """A structural schema that refuses unknown fields, as strict field validation does."""
    if not isinstance(node, dict):
        return node
    out = {k: ([_closed(i) for i in v] if isinstance(v, list) and k in ("anyOf", "allOf", "oneOf")
               else _closed(v) if k in ("items", "additionalProperties", "not") else v)
           for k, v in node.items()}
    if "properties" in node:
        out["properties"] = {k: _closed(v) for k, v in node["properties"].items()}
        if "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    return out


@functools.cache
def read_without_schema(api: str, kind: str) -> bool:
    """Kinds kaisched reads whose schema is not at hand: other schedulers' gangs
    and the owners the PodGrouper groups (any version). Only their metadata is
    checked. (The upstream Workload API's kinds are Kubernetes' own: a version
    serves them, with its schema, or refuses them.)"""
    if (api, kind) in {(k.api_version, k.kind) for k in (XK8S_PODGROUP, KOORD_PODGROUP, KAI_TOPOLOGY)}:
        return True
    if (api, kind) in {k.pods.gang_object for k in workloadkinds.KINDS if k.pods.gang_label}:
        return True         # an operator's gang the PodGrouper reads (Grove's PodGang)
    group = api.rpartition("/")[0]
    return not is_builtin_group(group) and workloadkinds.lookup(group, kind) is not None
