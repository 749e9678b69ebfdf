#!/usr/bin/env python3
"""Generate the Kubernetes protobuf schemas under proto/k8s/ (Python 3.11, stdlib only).

kubectl 1.31+ sends request bodies as Kubernetes protobuf. We have no protoc
and no upstream `generated.proto` files, so this script rebuilds them from two
crates in the local cargo registry:

* `k8s-pb` 0.9.0: prost-generated Rust for every Kubernetes proto package.
  Gives the messages, field numbers and types (`#[prost(..., tag = "N")]`),
  the package of each message (from the module path: `api/core/v1` is
  `k8s.io.api.core.v1`) and, from its `impl crate::Resource` blocks, the
  apiVersion and kind of each top-level type.
* `k8s-openapi` 0.29.0 (`src/v1_33`): Rust types whose serde code spells the
  real JSON field names (`"podIP" => Field::Key_pod_ip`) and whose type names
  are the upstream Go names (prost turns `CSIDriver` into `CsiDriver`).

Each k8s-pb struct is matched to the k8s-openapi struct of the same name
(case-insensitively) in the same group/version, then in another version of
the same group, then in another group; fields are matched by name,
case-insensitively and ignoring everything but letters and digits
(`external_i_ps` <-> `externalIPs`, `r#ref` <-> `$ref`). A field with no
such match is, in this order:

1. an embedded Go struct (`json:",inline"`) if it is a message whose JSON
   fields the parent's k8s-openapi struct has (`Volume.volumeSource`,
   `ConfigMapKeySelector.localObjectReference`): JSON name `,inline`;
2. the JSON spelling used for the same normalized name anywhere in
   k8s-openapi ("dictionary");
3. the first word of its doc comment, if that is the field's name
   (`insecureSkipTLSVerifyBackend indicates ...`; a Go name like `ShareID`
   becomes `shareID`);
4. a lowerCamelCase guess from the prost name.

The fallbacks are printed as a report (the safe ones, 2 and a 3 that agrees
with 4, only with `--verbose`).

Output (deterministic; safe to re-run):

* `proto/k8s/<package>.proto`, one per proto package (`syntax = "proto2"`,
  fully-qualified type references). Field names are the JSON names; a JSON
  name that is no proto identifier (`$ref`, `x-kubernetes-...`) gets a
  sanitized field name plus `[json_name = "..."]`.
* `proto/k8s/kinds.txt`: `apiVersion kind message` for every top-level kind
  that k8s-pb or k8s-openapi declares (`impl crate::Resource`), plus every
  message with ObjectMeta or ListMeta `metadata` (objects and lists) or named
  `*Review`, in a group known from those declarations or from GROUPS below.

Run from anywhere: `python3 proto/k8s/gen.py`, then `python3 proto/k8s/probe.py`
(needs kubectl) to refresh `zero_fields.txt` and to check the JSON names
against kubectl's Go types. The crates are looked up in
`$CARGO_HOME/registry/src/*/` (default `~/.cargo`); override with the
environment variables K8S_PB_SRC and K8S_OPENAPI_SRC (each the crate's root).
`cargo fetch` in the workspace brings k8s-openapi; k8s-pb is not a workspace
dependency, so fetch it once with e.g. `cargo new /tmp/pb && cd /tmp/pb &&
cargo add k8s-pb@0.9.0 && cargo fetch`.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent
PB_CRATE = "k8s-pb-0.9.0"
OPENAPI_CRATE = "k8s-openapi-0.29.0"
OPENAPI_VERSION_DIR = "v1_33"

# Messages the decoder turns into JSON by hand: their field names never reach
# JSON, so their fallbacks are not worth reporting.
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Verbs",
    "k8s.io.apimachinery.pkg.api.resource.Quantity",
    "k8s.io.apimachinery.pkg.api.resource.QuantityValue",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
    "k8s.io.apimachinery.pkg.runtime.RawExtension",
    "k8s.io.apimachinery.pkg.runtime.Unknown",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Timestamp",
}
SPECIAL |= {
    f"k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.{v}.{name}"
    for v in ("v1", "v1beta1")
    for name in ("JSON", "JSONSchemaPropsOrArray", "JSONSchemaPropsOrBool", "JSONSchemaPropsOrStringArray")
}

# API groups of the k8s-pb modules that declare no `impl crate::Resource` in any version.
GROUPS = {
    "api/admission": "admission.k8s.io",
    "api/apidiscovery": "apidiscovery.k8s.io",
    "api/extensions": "extensions",
    "api/imagepolicy": "imagepolicy.k8s.io",
    "apimachinery/pkg/apis/meta": "meta.k8s.io",
    "metrics/pkg/apis/metrics": "metrics.k8s.io",
    "metrics/pkg/apis/custom_metrics": "custom.metrics.k8s.io",
    "metrics/pkg/apis/external_metrics": "external.metrics.k8s.io",
}

SCALARS = {"string", "int32", "int64", "bool", "double", "float", "bytes", "uint32", "uint64"}
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def norm(name: str) -> str:
    """The matching key of a field or type name: lowercase letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def crate_root(env: str, crate: str) -> Path:
    """Find a crate's source root in the cargo registry (or from an environment variable)."""
    if os.environ.get(env):
        return Path(os.environ[env])
    cargo_home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    found = sorted(glob.glob(os.path.join(cargo_home, "registry", "src", "*", crate)))
    if not found:
        sys.exit(f"gen.py: {crate} not found under {cargo_home}/registry/src (set {env}); see the top of this file")
    return Path(found[0])


# ---------------------------------------------------------------- k8s-openapi


@dataclass
class OpenApiStruct:
    name: str
    fields: dict[str, str]  # norm(json name) -> json name


def read_openapi(root: Path):
    """Structs (by module dir) with their JSON field names, and the kinds they declare."""
    base = root / "src" / OPENAPI_VERSION_DIR
    structs: dict[str, dict[str, OpenApiStruct]] = defaultdict(dict)  # dir -> norm(name) -> struct
    kinds: list[tuple[str, str, str, str]] = []  # (dir, struct, apiVersion, kind)
    for path in sorted(base.rglob("*.rs")):
        if path.name == "mod.rs":
            continue
        text = path.read_text()
        module = path.parent.relative_to(base).as_posix()
        for m in re.finditer(r"^pub (?:struct|enum) (\w+)", text, re.M):
            name = m.group(1)
            # The Deserialize impl of this struct spells every JSON name once.
            impl = re.search(
                r"impl<'de(?:, T)?> crate::serde::Deserialize<'de> for " + name + r"\b[^{]*\{(.*?)\n\}\n", text, re.S
            )
            fields = {}
            if impl:
                for json in re.findall(r'^\s*"([^"]+)" => Field::Key_\w+,', impl.group(1), re.M):
                    fields[norm(json)] = json
            structs[module][norm(name)] = OpenApiStruct(name, fields)
        for m in re.finditer(
            r"impl crate::Resource for (\w+) \{.*?API_VERSION: &'static str = \"([^\"]*)\";"
            r".*?KIND: &'static str = \"([^\"]*)\";",
            text,
            re.S,
        ):
            kinds.append((module, m.group(1), m.group(2), m.group(3)))
    return structs, kinds


# --------------------------------------------------------------------- k8s-pb


@dataclass
class PbField:
    rust: str  # the prost field name, without r#
    number: int
    label: str  # optional | repeated | map
    type: str  # scalar name, or ("message" ref resolved later)
    ref: tuple[str, str] | None = None  # (module dir, rust struct) for message types
    map_value: str | None = None  # for maps: scalar value type, or "message"
    doc: str = ""  # the field's doc comment, which often starts with its JSON name


@dataclass
class PbStruct:
    module: str
    rust: str
    fields: list[PbField] = field(default_factory=list)


def resolve(module: str, rust_path: str) -> tuple[str, str]:
    """Resolve a Rust type path (`super::super::core::v1::Pod`, `Pod`) seen in `module`."""
    parts = [p for p in rust_path.replace(" ", "").split("::") if p]
    here = module.split("/")
    while parts and parts[0] == "super":
        parts.pop(0)
        here.pop()
    if parts and parts[0] == "crate":
        parts.pop(0)
        here = []
    return "/".join(here + parts[:-1]), parts[-1]


def inner_type(rust_type: str) -> str:
    """The message type inside Option<..>, Vec<..>, Box<..> or as the value of a BTreeMap."""
    t = re.sub(r"\s+", "", rust_type).replace(",>", ">")
    if "BTreeMap<" in t:
        t = t[t.index("BTreeMap<") + len("BTreeMap<") : -1]
        t = t.split(",", 1)[1]
    for wrapper in ("::core::option::Option<", "::prost::alloc::vec::Vec<", "::prost::alloc::boxed::Box<"):
        while t.startswith(wrapper):
            t = t[len(wrapper) : -1]
    return t


FIELD = re.compile(r"#\[prost\(([^\]]*)\)\]\s*((?:///[^\n]*\n\s*)*)pub (?:r#)?(\w+):\s*(.*?),\s*\n(?=\s*(?:///|#\[|$))", re.S)


def parse_field(module: str, struct: str, attrs: str, rust: str, rust_type: str, doc: str) -> PbField:
    """One prost field from its attribute, name, Rust type and doc comment."""
    number = int(re.search(r'tag = "(\d+)"', attrs).group(1))
    kind = attrs.split(",", 1)[0].split("=", 1)[0].strip()
    f = PbField(rust, number, "optional", kind, doc=doc)
    if kind == "btree_map":
        key, value = re.search(r'btree_map = "(\w+), (\w+)"', attrs).groups()
        if key != "string":
            raise SystemExit(f"gen.py: unexpected map key {key} in {module}::{struct}")
        f.label, f.map_value = "map", value
        if value == "message":
            f.ref = resolve(module, inner_type(rust_type))
        return f
    if "repeated" in attrs:
        f.label = "repeated"
    if kind == "message":
        f.ref = resolve(module, inner_type(rust_type))
    elif kind not in SCALARS:
        raise SystemExit(f"gen.py: unexpected prost type {kind} in {module}::{struct}")
    return f


def read_pb(root: Path):
    """Every prost struct (by module dir) and the kinds declared by `impl crate::Resource`."""
    base = root / "src"
    structs: dict[tuple[str, str], PbStruct] = {}
    kinds: list[tuple[str, str, str, str]] = []
    for path in sorted(base.rglob("mod.rs")):
        module = path.parent.relative_to(base).as_posix()
        text = path.read_text()
        for m in re.finditer(r"^pub struct (\w+) \{(?:\}|\n(.*?)^\})", text, re.M | re.S):
            s = PbStruct(module, m.group(1))
            # Doc comments sit above the attribute; the comment of a field ends where the previous field ends.
            body, start = m.group(2) or "", 0
            for f in FIELD.finditer(body):
                doc = re.findall(r"///\s?([^\n]*)", body[start : f.start()] + f.group(2))
                s.fields.append(parse_field(module, s.rust, f.group(1), f.group(3), f.group(4), " ".join(doc)))
                start = f.end()
            structs[(module, s.rust)] = s
        for m in re.finditer(
            r"impl crate::Resource for (\w+) \{\s*const API_VERSION: &'static str = \"([^\"]*)\";"
            r".*?const KIND: &'static str = \"([^\"]*)\";",
            text,
            re.S,
        ):
            kinds.append((module, m.group(1), m.group(2), m.group(3)))
    return structs, kinds


# ----------------------------------------------------------------- generation


def package_of(module: str) -> str:
    """The proto package of a k8s-pb module dir: `api/core/v1` -> `k8s.io.api.core.v1`."""
    return "k8s.io." + module.replace("/", ".")


def lower_camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def proto_ident(json: str) -> str:
    """A proto field name for a JSON name that is no identifier (`$ref` -> `ref`)."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", json) if w]
    return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:])


def go_to_json(word: str) -> str:
    """The JSON name Go's conventions give a Go field name (`ShareID` -> `shareID`, `IPFamilies` -> `ipFamilies`)."""
    run = re.match(r"[A-Z]+", word)
    if not run:
        return word
    n = len(run.group(0))
    if 1 < n < len(word) and word[n].islower():
        n -= 1  # `IPFamilies`: the last capital starts the next word
    return word[:n].lower() + word[n:]


class Generator:
    def __init__(self, pb_root: Path, openapi_root: Path):
        self.pb, self.pb_kinds = read_pb(pb_root)
        self.oa, self.oa_kinds = read_openapi(openapi_root)
        # `XList` types have no struct of their own in k8s-openapi, only the generic `List<T>`.
        self.list_struct = self.oa.get(".", {}).get("list")
        # JSON spellings of every normalized field name in k8s-openapi, most used first.
        spellings: dict[str, Counter] = defaultdict(Counter)
        for by_name in self.oa.values():
            for s in by_name.values():
                for key, json in s.fields.items():
                    spellings[key][json] += 1
        self.dictionary = {k: c.most_common(1)[0][0] for k, c in spellings.items()}
        self.ambiguous = {k for k, c in spellings.items() if len(c) > 1}
        kind_names = {(module, rust): kind for module, rust, _, kind in self.pb_kinds}
        self.names = {key: self.canonical(key, kind_names) for key in self.pb}
        self.report: dict[str, list[str]] = defaultdict(list)
        self.json_names: dict[tuple[str, str], dict[int, str]] = {}

    def group_modules(self, module: str) -> list[str]:
        """k8s-openapi module dirs of the same group as `module`: itself first, then stable, beta, alpha, newest first."""
        group = module.rsplit("/", 1)[0]
        others = [m for m in self.oa if m.rsplit("/", 1)[0] == group and m != module]
        stability = lambda m: 0 if re.search(r"/v\d+$", m) else 1 if "beta" in m else 2
        others = sorted(sorted(others, reverse=True), key=stability)
        return ([module] if module in self.oa else []) + others

    def openapi_struct(self, module: str, name: str) -> OpenApiStruct | None:
        """The k8s-openapi struct of this name in this group/version, else in another version of the group."""
        for m in self.group_modules(module):
            if norm(name) in self.oa[m]:
                return self.oa[m][norm(name)]
        if name.endswith("List") and self.openapi_struct(module, name[:-4]):
            return self.list_struct
        # A type that k8s-openapi has only in another group (extensions/v1beta1 Ingress is networking's).
        for m in sorted(self.oa, key=lambda m: (0 if re.search(r"/v\d+$", m) else 1, m)):
            if m.startswith("api/") and module.startswith("api/") and norm(name) in self.oa[m]:
                return self.oa[m][norm(name)]
        return None

    def canonical(self, key: tuple[str, str], kind_names: dict) -> str:
        """The upstream message name of a prost struct (`CsiDriver` -> `CSIDriver`)."""
        module, rust = key
        if key in kind_names:
            return kind_names[key]
        if rust.endswith("List") and (module, rust[:-4]) in self.pb:
            return self.canonical((module, rust[:-4]), kind_names) + "List"
        found = self.openapi_struct(module, rust)
        return found.name if found else rust

    def full_name(self, key: tuple[str, str]) -> str:
        if key not in self.pb:
            raise SystemExit(f"gen.py: unresolved type {key}")
        return package_of(key[0]) + "." + self.names[key]

    def struct_json_names(self, key: tuple[str, str]) -> dict[int, str]:
        """JSON name of every field of a prost struct, by field number (",inline" for embedded structs)."""
        if key not in self.json_names:
            self.json_names[key] = {}  # guards against recursion through self-referencing types
            s = self.pb[key]
            self.json_names[key] = {f.number: self.json_name(s, f) for f in s.fields}
        return self.json_names[key]

    def flat_json_names(self, key: tuple[str, str]) -> set[str]:
        """The JSON names a struct contributes to its JSON object, embedded structs expanded."""
        names = set()
        for f in self.pb[key].fields:
            json = self.struct_json_names(key).get(f.number)
            names |= self.flat_json_names(f.ref) if json == ",inline" else {json} if json else set()
        return names

    def json_name(self, s: PbStruct, f: PbField) -> str:
        """The JSON name of one field: see the top of this file for the order of the rules."""
        full = self.full_name((s.module, s.rust))

        def note(what: str, json: str) -> None:
            if full not in SPECIAL:
                self.report[what].append(f"{full}.{f.rust} -> {json}")

        key = norm(f.rust)
        found = self.openapi_struct(s.module, self.names[(s.module, s.rust)])
        if found and key in found.fields:
            return found.fields[key]
        # A Go struct embedded with `json:",inline"` is a proto field whose JSON fields sit in the parent.
        if found and f.type == "message" and f.label == "optional":
            inner = {norm(j) for j in self.flat_json_names(f.ref)}
            # Newer fields of the embedded struct may be missing from k8s-openapi: allow a quarter.
            if inner and len(inner & set(found.fields)) >= 0.75 * len(inner):
                note("inline", ",inline")
                return ",inline"
        if key in self.dictionary:
            json = self.dictionary[key]
            note("dictionary", json + (" (ambiguous)" if key in self.ambiguous else ""))
            return json
        # API docs begin with the field's JSON or Go name: "insecureSkipTLSVerifyBackend indicates ...".
        first = re.sub(r"^[^A-Za-z]+|[^A-Za-z0-9]+$", "", (f.doc.split() or [""])[0])
        if norm(first) == key:
            json = go_to_json(first)
            # Only a spelling that differs from the lowerCamelCase guess is news.
            note("doc comment" if json != lower_camel(f.rust) else "doc comment = lowerCamelCase", json)
            return json
        note("camelCase", lower_camel(f.rust))
        return lower_camel(f.rust)

    def field_line(self, s: PbStruct, f: PbField, imports: set[str]) -> str:
        json = self.struct_json_names((s.module, s.rust))[f.number]
        name, option = json, ""
        if json == ",inline":
            name, option = lower_camel(f.rust), f' [json_name = "{json}"]'
        elif not IDENT.match(json):
            name, option = proto_ident(json), f' [json_name = "{json}"]'
        if f.ref:
            ref_module = f.ref[0]
            if ref_module != s.module:
                imports.add(package_of(ref_module))
            target = "." + self.full_name(f.ref)
        if f.label == "map":
            value = target if f.map_value == "message" else f.map_value
            return f"  map<string, {value}> {name} = {f.number}{option};"
        type_ = target if f.type == "message" else f.type
        return f"  {f.label} {type_} {name} = {f.number}{option};"

    def proto_files(self) -> dict[str, str]:
        by_module: dict[str, list[PbStruct]] = defaultdict(list)
        for s in self.pb.values():
            by_module[s.module].append(s)
        files = {}
        for module, structs in sorted(by_module.items()):
            package = package_of(module)
            imports: set[str] = set()
            body = []
            for s in sorted(structs, key=lambda s: self.names[(s.module, s.rust)]):
                body.append(f"message {self.names[(s.module, s.rust)]} {{")
                body += [self.field_line(s, f, imports) for f in sorted(s.fields, key=lambda f: f.number)]
                body.append("}\n")
            head = [
                "// Generated by proto/k8s/gen.py from the k8s-pb and k8s-openapi crates. Do not edit.",
                'syntax = "proto2";\n',
                f"package {package};\n",
            ]
            head += [f'import "{p}.proto";' for p in sorted(imports)]
            files[f"{package}.proto"] = "\n".join(head + ([""] if imports else []) + body)
        return files

    def kinds(self) -> list[str]:
        """`apiVersion kind message` for each Resource impl, and each object or list message of a known group."""
        table: dict[tuple[str, str], str] = {}
        groups: dict[str, str] = dict(GROUPS)  # module dir without its version -> API group
        for module, rust, api_version, kind in self.pb_kinds:
            table[(api_version, kind)] = self.full_name((module, rust))
            groups[module.rsplit("/", 1)[0]] = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
        for module, rust, api_version, kind in self.oa_kinds:
            if (api_version, kind) in table:
                continue
            match = [k for k in self.pb if k[0] == module and self.names[k] == kind]
            if match:
                table[(api_version, kind)] = self.full_name(match[0])
            else:
                self.report["kinds without a message"].append(f"{api_version} {kind}")
        meta = ("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta", "k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta")
        for (module, rust), s in self.pb.items():
            group = groups.get(module.rsplit("/", 1)[0])
            top_level = self.names[(module, rust)].endswith("Review") or any(
                f.ref and self.full_name(f.ref) in meta and self.struct_json_names((module, rust))[f.number] == "metadata"
                for f in s.fields
            )
            if group is None or not top_level:
                continue
            version = module.rsplit("/", 1)[1]
            api_version = f"{group}/{version}" if group else version
            table.setdefault((api_version, self.names[(module, rust)]), self.full_name((module, rust)))
        return [f"{a} {k} {m}" for (a, k), m in sorted(table.items())]


def main() -> None:
    gen = Generator(crate_root("K8S_PB_SRC", PB_CRATE), crate_root("K8S_OPENAPI_SRC", OPENAPI_CRATE))
    files = gen.proto_files()
    kinds = gen.kinds()
    for stale in OUT_DIR.glob("*.proto"):
        if stale.name not in files:
            stale.unlink()
    for name, text in files.items():
        (OUT_DIR / name).write_text(text)
    header = [
        "# Generated by proto/k8s/gen.py. Do not edit.",
        "# apiVersion kind fully-qualified-message, for every top-level kind k8s-pb or k8s-openapi knows.",
    ]
    (OUT_DIR / "kinds.txt").write_text("\n".join(header + kinds) + "\n")
    messages = len(gen.pb)
    print(f"wrote {len(files)} .proto files ({messages} messages) and kinds.txt ({len(kinds)} kinds) to {OUT_DIR}")
    # Names taken from another k8s-openapi struct, or confirmed by the doc comment, are safe: listed on request.
    verbose = "--verbose" in sys.argv[1:]
    quiet = {"dictionary", "doc comment = lowerCamelCase"}
    for what, lines in sorted(gen.report.items()):
        listed = verbose or what not in quiet
        print(f"\n{what} ({len(lines)}){'' if listed else ': pass --verbose to list'}")
        for line in sorted(lines) if listed else []:
            print(f"  {line}")


if __name__ == "__main__":
    main()
