#!/usr/bin/env python3
"""Generates the SDKs' typed models of the common Kubernetes kinds from the API server's OpenAPI
v3 schema: Python TypedDicts (plugins/python/src/kubewasm/k8s.py) and TypeScript types
(plugins/js/k8s.d.ts). The kinds are those of the SDKs' `kinds` modules; every type they reach
is generated with them.

    scripts/k8s-types.py --kubeconfig FILE           # regenerate from a running API server
    scripts/k8s-types.py --kubeconfig FILE --check   # exit 1 when the files differ from it

The end-to-end suite runs the check against the local control plane it builds, so the models
follow the Kubernetes version the project tests with.
"""

from __future__ import annotations

import argparse
import difflib
import json
import keyword
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON_OUT = ROOT / "plugins/python/src/kubewasm/k8s.py"
TS_OUT = ROOT / "plugins/js/k8s.d.ts"

# The kinds of plugins/python/src/kubewasm/kinds.py (and the JS and Go SDKs' kinds), by the
# OpenAPI v3 document that has them.
KINDS = {
    "api/v1": [
        "ConfigMap",
        "Endpoints",
        "Event",
        "Namespace",
        "Node",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Pod",
        "Secret",
        "Service",
        "ServiceAccount",
    ],
    "apis/apps/v1": ["DaemonSet", "Deployment", "ReplicaSet", "StatefulSet"],
    "apis/batch/v1": ["CronJob", "Job"],
    "apis/networking.k8s.io/v1": ["Ingress"],
    "apis/coordination.k8s.io/v1": ["Lease"],
    "apis/policy/v1": ["PodDisruptionBudget"],
    "apis/rbac.authorization.k8s.io/v1": ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"],
}

REF = "#/components/schemas/"


@dataclass
class Kind:
    api_version: str
    kind: str


def fetch(kubeconfig: str) -> dict[str, dict]:
    """Every schema of the documents KINDS names, by its OpenAPI name."""
    schemas: dict[str, dict] = {}
    for path in KINDS:
        text = subprocess.run(
            [os.environ.get("KUBECTL", "kubectl"), "--kubeconfig", kubeconfig, "get", "--raw", f"/openapi/v3/{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        schemas.update(json.loads(text)["components"]["schemas"])
    return schemas


def first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text


class Model:
    """The schemas the kinds reach, with a short unique name for each."""

    def __init__(self, schemas: dict[str, dict]):
        self.schemas = schemas
        self.kinds: dict[str, Kind] = {}
        roots = []
        for path, kinds in KINDS.items():
            for kind in kinds:
                group_version = path.removeprefix("api/").removeprefix("apis/")
                name = self._find_kind(path, group_version, kind)
                self.kinds[name] = Kind(group_version, kind)
                roots.append(name)
        self.reached: list[str] = []
        seen: set[str] = set()
        stack = list(reversed(roots))
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            self.reached.append(name)
            stack.extend(sorted(set(self._refs(self.schemas[name])) - seen, reverse=True))
        self.reached.sort(key=lambda n: (self.short(n), n))
        self.names = self._name_all()

    def _find_kind(self, path: str, group_version: str, kind: str) -> str:
        group, _, version = group_version.rpartition("/")
        for name, schema in self.schemas.items():
            for gvk in schema.get("x-kubernetes-group-version-kind", []):
                if gvk.get("group", "") == group and gvk["version"] == version and gvk["kind"] == kind:
                    return name
        raise SystemExit(f"error: the API server's /openapi/v3/{path} has no kind {kind}")

    def _refs(self, schema: dict):
        if "$ref" in schema:
            yield schema["$ref"].removeprefix(REF)
        for key in ("items", "additionalProperties"):
            if isinstance(schema.get(key), dict):
                yield from self._refs(schema[key])
        for sub in schema.get("allOf", []) + schema.get("oneOf", []) + schema.get("anyOf", []):
            yield from self._refs(sub)
        for prop in schema.get("properties", {}).values():
            yield from self._refs(prop)

    @staticmethod
    def short(name: str) -> str:
        return name.rsplit(".", 1)[-1]

    def _name_all(self) -> dict[str, str]:
        by_short: dict[str, list[str]] = {}
        for name in self.reached:
            by_short.setdefault(self.short(name), []).append(name)
        names = {}
        for short, full in by_short.items():
            if len(full) == 1:
                names[full[0]] = short
                continue
            # Two packages' types of one name: qualify each with its group and version
            # (io.k8s.api.events.v1.Event: EventsV1Event).
            for name in full:
                parts = name.split(".")
                names[name] = "".join(p[:1].upper() + p[1:] for p in parts[-3:-1]) + short
        return names

    def scalar(self, name: str) -> str | None:
        """What a schema without properties stands for: a Quantity, a Time, an IntOrString."""
        schema = self.schemas[name]
        if schema.get("properties"):
            return None
        if schema.get("x-kubernetes-int-or-string") or schema.get("format") == "int-or-string":
            return "int-or-string"
        kind = schema.get("type")
        if kind in ("string", "integer", "number", "boolean"):
            return kind
        if "oneOf" in schema:
            return "number-or-string"
        return "any-object" if kind == "object" or not kind else None


def unwrap(schema: dict) -> dict:
    # A property that only adds a default or a description to a reference: allOf: [{$ref}].
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return {**schema["allOf"][0], **{k: v for k, v in schema.items() if k != "allOf"}}
    return schema


class Language:
    """How a language spells the schema's types; `type` walks a schema the same for every one."""

    # A scalar kind (`Model.scalar`, or a property's own type) as this language spells it.
    SCALARS: dict[str, str]
    ANY: str

    def __init__(self, model: Model):
        self.model = model

    def list_of(self, item: str) -> str:
        raise NotImplementedError

    def map_of(self, value: str) -> str:
        raise NotImplementedError

    # The file's opening lines, and the blank lines between two types.
    HEADER: list[str]
    GAP: int

    def render_type(self, name: str) -> list[str]:
        raise NotImplementedError

    def render(self) -> str:
        out = list(self.HEADER)
        for name in self.model.reached:
            if self.model.scalar(name):
                continue
            out.extend([""] * self.GAP)
            out.extend(self.render_type(name))
        return "\n".join(out) + "\n"

    def type(self, schema: dict) -> str:
        schema = unwrap(schema)
        if "$ref" in schema:
            name = schema["$ref"].removeprefix(REF)
            scalar = self.model.scalar(name)
            return self.SCALARS[scalar] if scalar else self.model.names[name]
        if schema.get("x-kubernetes-int-or-string"):
            return self.SCALARS["int-or-string"]
        kind = schema.get("type")
        if kind == "array":
            return self.list_of(self.type(schema.get("items", {})))
        if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
            return self.map_of(self.type(schema["additionalProperties"]))
        if kind in ("string", "integer", "number", "boolean"):
            return self.SCALARS[kind]
        return self.SCALARS["any-object"] if kind == "object" else self.ANY


class Python(Language):
    SCALARS = {
        "string": "str",
        "integer": "int",
        "number": "float",
        "boolean": "bool",
        "int-or-string": "int | str",
        "number-or-string": "str | int | float",
        "any-object": "dict[str, Any]",
    }
    ANY = "Any"

    def list_of(self, item: str) -> str:
        return f"list[{item}]"

    def map_of(self, value: str) -> str:
        return f"dict[str, {value}]"

    GAP = 2
    HEADER = [
        '"""Typed models of the common Kubernetes kinds (those of `kubewasm.kinds`) and every type',
        "they use: TypedDicts, so an object is still the dict the SDK reads and writes. Generated",
        "by scripts/k8s-types.py from the API server's OpenAPI v3 schema; do not edit.",
        "",
        "    from typing import cast",
        "    from kubewasm import k8s",
        "",
        "    deployment = cast(k8s.Deployment, ctx.get(kinds.DEPLOYMENT, ns, name))",
        '    replicas = deployment["spec"].get("replicas", 1)',
        '    ctx.apply(k8s.ConfigMap(apiVersion="v1", kind="ConfigMap", metadata={"name": "x"}))',
        "",
        "Fields the schema requires are `Required`; the rest may be absent. A type checker (mypy,",
        "pyright) checks names and types; at run time these are plain dicts. Import the module",
        "under `if TYPE_CHECKING:` to keep it out of the component.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any, Literal, Required, TypedDict",
    ]

    def render_type(self, name: str) -> list[str]:
        schema = self.model.schemas[name]
        short = self.model.names[name]
        required = set(schema.get("required", []))
        fields = []
        kind = self.model.kinds.get(name)
        for field, prop in sorted(schema.get("properties", {}).items()):
            if kind and field == "apiVersion":
                typ, req = f'Literal["{kind.api_version}"]', True
            elif kind and field == "kind":
                typ, req = f'Literal["{kind.kind}"]', True
            else:
                typ, req = self.type(prop), field in required
            fields.append((field, f"Required[{typ}]" if req else typ))
        doc = first_sentence(schema.get("description", short)).replace('"""', "'''").replace("\\", "\\\\")
        if all(f.isidentifier() and not keyword.iskeyword(f) for f, _ in fields):
            lines = [f"class {short}(TypedDict, total=False):", f'    """{doc}"""', ""]
            lines += [f"    {f}: {t}" for f, t in fields]
            return lines
        # A field that is no Python identifier (ListMeta's `continue`): the functional form,
        # whose annotations are evaluated at once, so each is a string (a forward reference).
        items = ", ".join(f"{f!r}: {t!r}" for f, t in fields)
        return [f"{short} = TypedDict({short!r}, {{{items}}}, total=False)", f'"""{doc}"""']


class TypeScript(Language):
    SCALARS = {
        "string": "string",
        "integer": "number",
        "number": "number",
        "boolean": "boolean",
        "int-or-string": "number | string",
        "number-or-string": "string | number",
        "any-object": "{ [key: string]: unknown }",
    }
    ANY = "unknown"

    def list_of(self, item: str) -> str:
        return f"({item})[]" if "|" in item else f"{item}[]"

    def map_of(self, value: str) -> str:
        return f"{{ [key: string]: {value} }}"

    GAP = 1
    HEADER = [
        "// Types of the common Kubernetes kinds (those of the SDK's `kinds`) and every type they",
        "// use, generated by scripts/k8s-types.py from the API server's OpenAPI v3 schema; do not",
        "// edit. Fields the schema requires are required. Each kind's type is a type alias, so",
        "// an object of it is a KubeObject and goes wherever one does:",
        "//",
        "//   import type { Deployment } from '@kubewasm/sdk/k8s';",
        "//   const deployment = ctx.get(kinds.DEPLOYMENT, ns, name); // Deployment | undefined",
        "",
    ]

    def render_type(self, name: str) -> list[str]:
        schema = self.model.schemas[name]
        short = self.model.names[name]
        required = set(schema.get("required", []))
        kind = self.model.kinds.get(name)
        doc = first_sentence(schema.get("description", short)).replace("*/", "* /")
        lines = [f"/** {doc} */", f"export type {short} = {{"]
        for field, prop in sorted(schema.get("properties", {}).items()):
            if kind and field in ("apiVersion", "kind"):
                value = kind.api_version if field == "apiVersion" else kind.kind
                lines.append(f"  {field}: '{value}';")
                continue
            key = field if re.fullmatch(r"[A-Za-z_$][\w$]*", field) else json.dumps(field)
            description = unwrap(prop).get("description")
            if description:
                lines.append(f"  /** {first_sentence(description).replace('*/', '* /')} */")
            optional = "" if field in required else "?"
            lines.append(f"  {key}{optional}: {self.type(prop)};")
        lines.append("};")
        return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True, help="the API server to read the schema from")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = parser.parse_args()
    model = Model(fetch(args.kubeconfig))
    outputs = {PYTHON_OUT: Python(model).render(), TS_OUT: TypeScript(model).render()}
    stale = False
    for path, text in outputs.items():
        current = path.read_text() if path.exists() else ""
        if current == text:
            continue
        if args.check:
            stale = True
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(path), "generated", lineterm="", n=1)
            print("\n".join(list(diff)[:40]), file=sys.stderr)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("error: the typed models differ from the API server's schema: run scripts/k8s-types.py --kubeconfig FILE", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
