#!/usr/bin/env python3
"""Generate `list_meta.rs`: list, map and patch metadata for the OpenAPI schemas.

Why
    k8s-openapi's schemars output has no `x-kubernetes-list-type`,
    `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`,
    `x-kubernetes-patch-strategy` or `x-kubernetes-patch-merge-key`. Its
    `impl DeepMerge` blocks encode the list and map semantics, though:

        crate::merge_strategies::list::map(&mut self.containers, other.containers,
            &[|lhs, rhs| lhs.name == rhs.name], ...)     -> listType=map, keys [name]
        crate::merge_strategies::list::set(&mut self.finalizers, ...)   -> listType=set
        crate::merge_strategies::list::atomic(&mut self.args, ...)      -> listType=atomic
        crate::merge_strategies::map::granular(&mut self.labels, ...)   -> (the default: none)
        crate::merge_strategies::map::atomic(&mut self.selector, ...)   -> mapType=atomic

    This script reads those blocks from k8s-openapi's `v1_33` sources, maps
    Rust field names to JSON names through each file's serde `visit_str`
    match (`"containerPort" => Field::Key_container_port`), and writes a
    static table, plus the group/version/kind of every top-level kind (from
    `impl crate::Resource` / `impl crate::ListableResource`). At run time
    `openapi::extensions` turns the table into the schema extensions and
    derives the strategic-merge-patch tags from it (listType=map ->
    patchStrategy=merge + patchMergeKey=<first key>; listType=set of scalars
    -> patchStrategy=merge; atomic -> nothing).

Overrides
    Where kube's Go tags (`patchStrategy`, `patchMergeKey`, `listMapKey`,
    `+structType=atomic`) differ from what the DeepMerge blocks say, the
    tables below (LIST_OVERRIDES, PATCH_OVERRIDES, ATOMIC_STRUCTS, and
    REQUIRED_OVERRIDES for `required` lists) record the upstream value.
    Every entry was checked against kube v1.33's published OpenAPI
    (`api/openapi-spec`), which carries the same `x-kubernetes-*`
    extensions; see the comment on each table.

Usage
    python3 generic-server/src/openapi/gen_list_meta.py [K8S_OPENAPI_SRC]
        [--check-against UPSTREAM_SPEC]

    K8S_OPENAPI_SRC defaults to the newest `~/.cargo/registry/src/*/
    k8s-openapi-0.29.*/src/v1_33`. The output (`list_meta.rs` next to this
    script) is sorted and depends only on the input, so re-running it on the
    same sources gives the same bytes. Standard library only.

    --check-against compares the result (table, derived patch tags and
    overrides) with an upstream spec of the same Kubernetes version: kube's
    `api/openapi-spec/swagger.json` ("definitions"), a v3 document
    ("components.schemas") or a JSON-schema bundle ("$defs"). It prints every
    difference and exits 1 if there is one; run it after bumping k8s-openapi.
"""

import glob
import json
import os
import re
import sys

K8S_OPENAPI_GLOB = "~/.cargo/registry/src/*/k8s-openapi-0.29.*/src/v1_33"
OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "list_meta.rs")

# k8s-openapi leaves out list-map keys that are optional with a server-side
# default (`protocol` defaults to TCP, `whenUnsatisfiable` to DoNotSchedule),
# and models a few upstream listType=atomic lists as maps. Some upstream tags
# sit on fields DeepMerge treats as scalars (`[]byte` lists, a struct field's
# mapType). (schema, property) -> the upstream row, replacing or adding ours.
# Checked against kube v1.33 api/openapi-spec.
LIST_OVERRIDES = {
    ("io.k8s.api.apps.v1.StatefulSetSpec", "volumeClaimTemplates"): ("atomic", [], None),
    ("io.k8s.api.batch.v1.JobStatus", "conditions"): ("atomic", [], None),
    ("io.k8s.api.certificates.v1.CertificateSigningRequestSpec", "request"): ("atomic", [], None),
    ("io.k8s.api.certificates.v1.CertificateSigningRequestStatus", "certificate"): ("atomic", [], None),
    ("io.k8s.api.core.v1.Container", "ports"): ("map", ["containerPort", "protocol"], None),
    ("io.k8s.api.core.v1.EphemeralContainer", "ports"): ("map", ["containerPort", "protocol"], None),
    ("io.k8s.api.core.v1.PersistentVolumeSpec", "claimRef"): (None, [], "granular"),
    ("io.k8s.api.core.v1.PodSpec", "topologySpreadConstraints"): (
        "map", ["topologyKey", "whenUnsatisfiable"], None),
    ("io.k8s.api.core.v1.PodStatus", "hostIPs"): ("atomic", [], None),
    ("io.k8s.api.core.v1.ServiceSpec", "ports"): ("map", ["port", "protocol"], None),
    ("io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceSpec", "caBundle"): (
        "atomic", [], None),
    # kube tags the `details` pointer of Status `+listType=atomic` (a struct).
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Status", "details"): ("atomic", [], None),
    # Untagged upstream (so published without a list type).
    ("io.k8s.apimachinery.pkg.apis.meta.v1.APIResource", "verbs"): (None, [], None),
    # Tagged `+mapType=granular` upstream, so published.
    ("io.k8s.api.core.v1.PersistentVolumeClaimStatus", "allocatedResourceStatuses"): (
        None, [], "granular"),
}

# Where kube's `patchStrategy` / `patchMergeKey` tags are not what the list
# type implies (map -> merge + first key, set of scalars -> merge, otherwise
# nothing): (schema, property) -> (patch strategy, merge key); None for "no
# tag". Newer APIs declare listType without patch tags, a few old ones carry
# patch tags on atomic lists or on structs (retainKeys, replace). Checked
# against kube v1.33 api/openapi-spec (x-kubernetes-patch-strategy and
# x-kubernetes-patch-merge-key on every property of every definition).
NO_PATCH_TAGS = (None, None)
PATCH_OVERRIDES = {
    # retainKeys: clear the fields of the old union member on patch.
    ("io.k8s.api.apps.v1.DeploymentSpec", "strategy"): ("retainKeys", None),
    ("io.k8s.api.core.v1.PodSpec", "resourceClaims"): ("merge,retainKeys", "name"),
    ("io.k8s.api.core.v1.PodSpec", "volumes"): ("merge,retainKeys", "name"),
    ("io.k8s.api.core.v1.PodStatus", "resourceClaimStatuses"): ("merge,retainKeys", "name"),
    ("io.k8s.api.policy.v1.PodDisruptionBudgetSpec", "selector"): ("replace", None),
    # Atomic lists that still merge under strategic merge patch.
    ("io.k8s.api.batch.v1.JobStatus", "conditions"): ("merge", "type"),
    ("io.k8s.api.core.v1.PodStatus", "hostIPs"): ("merge", "ip"),
    # listType=map or set without patch tags.
    ("io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec",
     "validationActions"): NO_PATCH_TAGS,
    ("io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyStatus",
     "conditions"): NO_PATCH_TAGS,
    ("io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicyBindingSpec",
     "validationActions"): NO_PATCH_TAGS,
    ("io.k8s.api.admissionregistration.v1beta1.ValidatingAdmissionPolicyStatus",
     "conditions"): NO_PATCH_TAGS,
    ("io.k8s.api.apiserverinternal.v1alpha1.ServerStorageVersion",
     "decodableVersions"): NO_PATCH_TAGS,
    ("io.k8s.api.apiserverinternal.v1alpha1.ServerStorageVersion",
     "servedVersions"): NO_PATCH_TAGS,
    ("io.k8s.api.apiserverinternal.v1alpha1.StorageVersionStatus",
     "conditions"): NO_PATCH_TAGS,
    ("io.k8s.api.apiserverinternal.v1alpha1.StorageVersionStatus",
     "storageVersions"): NO_PATCH_TAGS,
    ("io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement", "values"): NO_PATCH_TAGS,
    ("io.k8s.api.batch.v1.UncountedTerminatedPods", "failed"): NO_PATCH_TAGS,
    ("io.k8s.api.batch.v1.UncountedTerminatedPods", "succeeded"): NO_PATCH_TAGS,
    ("io.k8s.api.certificates.v1.CertificateSigningRequestStatus", "conditions"): NO_PATCH_TAGS,
    ("io.k8s.api.core.v1.ResourceRequirements", "claims"): NO_PATCH_TAGS,
    ("io.k8s.api.core.v1.ResourceStatus", "resources"): NO_PATCH_TAGS,
    ("io.k8s.api.discovery.v1.Endpoint", "addresses"): NO_PATCH_TAGS,
    ("io.k8s.api.flowcontrol.v1.NonResourcePolicyRule", "nonResourceURLs"): NO_PATCH_TAGS,
    ("io.k8s.api.flowcontrol.v1.NonResourcePolicyRule", "verbs"): NO_PATCH_TAGS,
    ("io.k8s.api.flowcontrol.v1.ResourcePolicyRule", "apiGroups"): NO_PATCH_TAGS,
    ("io.k8s.api.flowcontrol.v1.ResourcePolicyRule", "namespaces"): NO_PATCH_TAGS,
    ("io.k8s.api.flowcontrol.v1.ResourcePolicyRule", "resources"): NO_PATCH_TAGS,
    ("io.k8s.api.flowcontrol.v1.ResourcePolicyRule", "verbs"): NO_PATCH_TAGS,
    ("io.k8s.api.resource.v1alpha3.AllocatedDeviceStatus", "conditions"): NO_PATCH_TAGS,
    ("io.k8s.api.resource.v1alpha3.ResourceClaimStatus", "devices"): NO_PATCH_TAGS,
    ("io.k8s.api.resource.v1beta1.AllocatedDeviceStatus", "conditions"): NO_PATCH_TAGS,
    ("io.k8s.api.resource.v1beta1.ResourceClaimStatus", "devices"): NO_PATCH_TAGS,
    ("io.k8s.api.resource.v1beta2.AllocatedDeviceStatus", "conditions"): NO_PATCH_TAGS,
    ("io.k8s.api.resource.v1beta2.ResourceClaimStatus", "devices"): NO_PATCH_TAGS,
    ("io.k8s.api.storage.v1.CSIDriverSpec", "volumeLifecycleModes"): NO_PATCH_TAGS,
    ("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus",
     "conditions"): NO_PATCH_TAGS,
}

# k8s-openapi's `required` lists differ from kube's for a few schemas (it
# makes some defaulted fields non-optional and drops a few required ones);
# the runtime also removes the `metadata` k8s-openapi requires on every kind.
# schema -> kube's `required` list. Checked against kube v1.33 api/openapi-spec.
REQUIRED_OVERRIDES = {
    "io.k8s.api.core.v1.ConfigMapEnvSource": [],
    "io.k8s.api.core.v1.ConfigMapKeySelector": ["key"],
    "io.k8s.api.core.v1.ConfigMapProjection": [],
    "io.k8s.api.core.v1.ConfigMapVolumeSource": [],
    "io.k8s.api.core.v1.Event": ["metadata", "involvedObject"],
    "io.k8s.api.core.v1.LocalObjectReference": [],
    "io.k8s.api.core.v1.SecretEnvSource": [],
    "io.k8s.api.core.v1.SecretKeySelector": ["key"],
    "io.k8s.api.core.v1.SecretProjection": [],
    "io.k8s.api.events.v1.Event": ["eventTime"],
    "io.k8s.api.networking.v1.NetworkPolicySpec": ["podSelector"],
}

# Structs tagged `+structType=atomic` upstream: the whole object is replaced,
# never merged field by field (`x-kubernetes-map-type: atomic` on the schema).
# DeepMerge has no notion of this. Checked against kube v1.33 api/openapi-spec.
ATOMIC_STRUCTS = [
    "io.k8s.api.admissionregistration.v1.MatchResources",
    "io.k8s.api.admissionregistration.v1.NamedRuleWithOperations",
    "io.k8s.api.admissionregistration.v1.ParamKind",
    "io.k8s.api.admissionregistration.v1.ParamRef",
    "io.k8s.api.admissionregistration.v1.Variable",
    "io.k8s.api.admissionregistration.v1alpha1.MatchResources",
    "io.k8s.api.admissionregistration.v1alpha1.NamedRuleWithOperations",
    "io.k8s.api.admissionregistration.v1alpha1.ParamKind",
    "io.k8s.api.admissionregistration.v1alpha1.ParamRef",
    "io.k8s.api.admissionregistration.v1beta1.MatchResources",
    "io.k8s.api.admissionregistration.v1beta1.NamedRuleWithOperations",
    "io.k8s.api.admissionregistration.v1beta1.ParamKind",
    "io.k8s.api.admissionregistration.v1beta1.ParamRef",
    "io.k8s.api.admissionregistration.v1beta1.Variable",
    "io.k8s.api.autoscaling.v1.CrossVersionObjectReference",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.EndpointAddress",
    "io.k8s.api.core.v1.EndpointPort",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.NodeSelector",
    "io.k8s.api.core.v1.NodeSelectorTerm",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.api.core.v1.ResourceFieldSelector",
    "io.k8s.api.core.v1.ScopeSelector",
    "io.k8s.api.core.v1.SecretKeySelector",
    "io.k8s.api.core.v1.SecretReference",
    "io.k8s.api.core.v1.TopologySelectorTerm",
    "io.k8s.api.core.v1.TypedLocalObjectReference",
    "io.k8s.api.discovery.v1.EndpointPort",
    "io.k8s.api.networking.v1.ServiceBackendPort",
    "io.k8s.api.rbac.v1.RoleRef",
    "io.k8s.api.rbac.v1.Subject",
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
]


def parse_args(argv):
    """(k8s-openapi v1_33 directory or None, upstream spec to check against or None)."""
    root, check = None, None
    args = iter(argv[1:])
    for arg in args:
        if arg == "--check-against":
            check = next(args, None)
            if check is None:
                sys.exit("--check-against needs a file")
        else:
            root = arg
    return root, check


def source_root(root):
    """The k8s-openapi v1_33 directory: the given one or the newest cached crate."""
    if root:
        return root
    found = sorted(glob.glob(os.path.expanduser(K8S_OPENAPI_GLOB)))
    if not found:
        sys.exit("k8s-openapi 0.29 sources not found; pass the v1_33 directory")
    return found[-1]


DEFINITION_RE = re.compile(r"^// Generated from definition (\S+)", re.M)
STRUCT_RE = re.compile(r"^pub struct (\w+) \{(.*?)^\}", re.M | re.S)
FIELD_RE = re.compile(r"^\s*pub (\w+): (.+),$", re.M)
SERDE_RE = re.compile(r'^\s*"([^"]+)" => Field::Key_(\w+),$', re.M)
STRATEGY_RE = re.compile(
    r"crate::merge_strategies::(list|map)::(map|set|atomic|granular)\(\s*"
    r"&mut self\.(\w+),\s*other\.\w+(?:,\s*&\[([^\]]*)\])?"
)
KEY_RE = re.compile(r"lhs\.([\w.()]+) ==")
CRATE_PATH_RE = re.compile(r"crate::((?:\w+::)*\w+)")
RESOURCE_RE = re.compile(
    r'impl crate::Resource for \w+ \{.*?const GROUP: &\'static str = "([^"]*)";'
    r'.*?const KIND: &\'static str = "([^"]*)";.*?const VERSION: &\'static str = "([^"]*)";',
    re.S,
)
LIST_KIND_RE = re.compile(r'const LIST_KIND: &\'static str = "([^"]*)";')


class Definition:
    """One generated k8s-openapi struct: its schema name, fields and serde names."""

    def __init__(self, module, text):
        self.name = DEFINITION_RE.search(text).group(1)
        struct = STRUCT_RE.search(text)
        self.rust_name = struct.group(1)
        self.path = module + "::" + self.rust_name
        self.field_types = dict(FIELD_RE.findall(struct.group(2)))
        self.json_names = {rust: name for name, rust in SERDE_RE.findall(text)}
        self.strategies = STRATEGY_RE.findall(text)
        resource = RESOURCE_RE.search(text)
        self.gvk = resource.groups() if resource else None
        list_kind = LIST_KIND_RE.search(text)
        self.list_kind = list_kind.group(1) if list_kind else None


def load_definitions(root):
    """Every non-generic struct under `root`, keyed by its crate path (`api::core::v1::Pod`)."""
    definitions = {}
    for path in sorted(glob.glob(os.path.join(root, "**", "*.rs"), recursive=True)):
        if os.path.basename(path) == "mod.rs":
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if not DEFINITION_RE.search(text) or not STRUCT_RE.search(text):
            continue
        module = os.path.relpath(os.path.dirname(path), root).replace(os.sep, "::")
        definition = Definition(module, text)
        definitions[definition.path] = definition
    return definitions


def element_definition(definitions, field_type):
    """The struct a `Vec<...>`/`Option<...>` field holds, if it is a k8s-openapi struct."""
    paths = CRATE_PATH_RE.findall(field_type)
    return definitions.get(paths[-1]) if paths else None


def json_key(definitions, element, rust_key):
    """The JSON name of a map key written as Rust (`container_port`, `metadata.name`)."""
    parts = []
    for segment in rust_key.replace("()", "").split("."):
        if element is None:
            return None
        parts.append(element.json_names.get(segment))
        element = element_definition(definitions, element.field_types.get(segment, ""))
    return ".".join(parts) if None not in parts else None


def field_meta(definitions, definition):
    """The (property, list type, map keys, map type) rows of one struct."""
    rows = []
    for kind, strategy, field, keys in definition.strategies:
        prop = definition.json_names.get(field)
        if prop is None:
            sys.exit(f"{definition.name}: no JSON name for field {field}")
        list_type, map_keys, map_type = None, [], None
        if kind == "list":
            list_type = strategy
            element = element_definition(definitions, definition.field_types.get(field, ""))
            for rust_key in KEY_RE.findall(keys or ""):
                key = json_key(definitions, element, rust_key)
                if key is None:
                    sys.exit(f"{definition.name}.{prop}: cannot map key {rust_key}")
                map_keys.append(key)
        elif strategy != "granular":
            # Granular is every map's default; kube publishes it only where a
            # Go tag says so (LIST_OVERRIDES), so a DeepMerge default adds nothing.
            map_type = strategy
        if list_type or map_type:
            rows.append((definition.name, prop, list_type, map_keys, map_type))
    return rows


def apply_list_overrides(rows):
    """`rows` with every LIST_OVERRIDES entry replacing or adding its row, sorted."""
    by_key = {(row[0], row[1]): row for row in rows}
    for (schema, prop), (list_type, map_keys, map_type) in LIST_OVERRIDES.items():
        by_key[(schema, prop)] = (schema, prop, list_type, list(map_keys), map_type)
    # An override of nothing removes a row (a list kube leaves untagged).
    return [by_key[key] for key in sorted(by_key) if by_key[key][2] or by_key[key][4]]


def rust_str(value):
    """A Rust string literal (schema and JSON names never need escapes)."""
    return '"' + value + '"'


def rust_option(value):
    """`Some("..")` or `None`."""
    return "None" if value is None else "Some(" + rust_str(value) + ")"


def kind_rows(definitions):
    """(schema, group, version, kind, list kind) of every top-level kind, sorted by schema."""
    rows = [
        (d.name, d.gvk[0], d.gvk[2], d.gvk[1], d.list_kind)
        for d in definitions.values()
        if d.gvk is not None
    ]
    return sorted(rows)


def render(rows, kinds):
    """The text of list_meta.rs."""
    out = [
        "//! List, map and patch metadata of the built-in schemas.",
        "//!",
        "//! GENERATED by `python3 generic-server/src/openapi/gen_list_meta.py` from the",
        "//! `impl DeepMerge` blocks of k8s-openapi 0.29 (`v1_33`), plus the upstream",
        "//! overrides documented in that script. Do not edit by hand.",
        "",
        "/// List and map semantics of one property of one schema.",
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]",
        "pub struct FieldMeta {",
        "    /// Component name of the schema holding the property.",
        "    pub schema: &'static str,",
        "    /// JSON name of the property.",
        "    pub property: &'static str,",
        "    /// `x-kubernetes-list-type` (`atomic`, `set` or `map`) for arrays.",
        "    pub list_type: Option<&'static str>,",
        "    /// `x-kubernetes-list-map-keys` (JSON names) when `list_type` is `map`.",
        "    pub map_keys: &'static [&'static str],",
        "    /// `x-kubernetes-map-type` (`atomic` or `granular`) for string-keyed maps.",
        "    pub map_type: Option<&'static str>,",
        "}",
        "",
        "/// Upstream patch tags that differ from what the list type implies.",
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]",
        "pub struct PatchOverride {",
        "    /// Component name of the schema holding the property.",
        "    pub schema: &'static str,",
        "    /// JSON name of the property.",
        "    pub property: &'static str,",
        "    /// `x-kubernetes-patch-strategy`, or `None` for no patch strategy.",
        "    pub strategy: Option<&'static str>,",
        "    /// `x-kubernetes-patch-merge-key`, or `None` for no merge key.",
        "    pub merge_key: Option<&'static str>,",
        "}",
        "",
        "/// kube's `required` list of a schema whose k8s-openapi list differs.",
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]",
        "pub struct RequiredOverride {",
        "    /// Component name of the schema.",
        "    pub schema: &'static str,",
        "    /// The properties kube marks required (empty: none).",
        "    pub required: &'static [&'static str],",
        "}",
        "",
        "/// Group, version and kind of a top-level schema (`impl Resource` in k8s-openapi).",
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]",
        "pub struct KindMeta {",
        "    /// Component name of the schema.",
        "    pub schema: &'static str,",
        "    /// API group (`\"\"` for the core group).",
        "    pub group: &'static str,",
        "    /// API version.",
        "    pub version: &'static str,",
        "    /// Kind.",
        "    pub kind: &'static str,",
        "    /// Kind of the matching list (`ConfigMapList`), if the kind is listable.",
        "    pub list_kind: Option<&'static str>,",
        "}",
        "",
        "/// Every list or map property of the built-in schemas, sorted by schema and property.",
        "pub static FIELD_META: &[FieldMeta] = &[",
    ]
    for schema, prop, list_type, map_keys, map_type in rows:
        keys = ", ".join(rust_str(k) for k in map_keys)
        out.append(
            f"    FieldMeta {{ schema: {rust_str(schema)}, property: {rust_str(prop)}, "
            f"list_type: {rust_option(list_type)}, map_keys: &[{keys}], "
            f"map_type: {rust_option(map_type)} }},"
        )
    out += [
        "];",
        "",
        "/// Properties whose upstream patch tags are not the ones derived from the list type.",
        "pub static PATCH_OVERRIDES: &[PatchOverride] = &[",
    ]
    for (schema, prop), (strategy, merge_key) in sorted(PATCH_OVERRIDES.items()):
        out.append(
            f"    PatchOverride {{ schema: {rust_str(schema)}, property: {rust_str(prop)}, "
            f"strategy: {rust_option(strategy)}, merge_key: {rust_option(merge_key)} }},"
        )
    out += [
        "];",
        "",
        "/// Schemas tagged `+structType=atomic` upstream (`x-kubernetes-map-type: atomic`).",
        "pub static ATOMIC_STRUCTS: &[&str] = &[",
    ]
    out += [f"    {rust_str(name)}," for name in sorted(ATOMIC_STRUCTS)]
    out += [
        "];",
        "",
        "/// Schemas whose `required` list is kube's rather than k8s-openapi's, sorted by schema.",
        "pub static REQUIRED_OVERRIDES: &[RequiredOverride] = &[",
    ]
    for schema, required in sorted(REQUIRED_OVERRIDES.items()):
        names = ", ".join(rust_str(r) for r in required)
        out.append(f"    RequiredOverride {{ schema: {rust_str(schema)}, required: &[{names}] }},")
    out += [
        "];",
        "",
        "/// Every top-level kind of the built-in schemas, sorted by schema.",
        "pub static KINDS: &[KindMeta] = &[",
    ]
    for schema, group, version, kind, list_kind in kinds:
        out.append(
            f"    KindMeta {{ schema: {rust_str(schema)}, group: {rust_str(group)}, "
            f"version: {rust_str(version)}, kind: {rust_str(kind)}, "
            f"list_kind: {rust_option(list_kind)} }},"
        )
    out += ["];", ""]
    return "\n".join(out)


# Upstream tags --check-against does not hold against us: kube v1.33 puts a
# list type on a struct (`Status.details`, `+listType=atomic` on a pointer)
# and keys StorageVersionMigrationList's items by `type` (a copy-paste of its
# conditions' tags); `<Kind>List` schemas are built at run time anyway.
IGNORED_UPSTREAM = {
    ("io.k8s.api.storagemigration.v1alpha1.StorageVersionMigrationList", "items"),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Status", "details"),
}


def upstream_schemas(path):
    """The schema definitions of an upstream spec file, by name."""
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    for key in ("definitions", "$defs"):
        if key in spec:
            return spec[key]
    return spec.get("components", {}).get("schemas", {})


def holds_scalars(prop):
    """Whether an array property's items are scalars (what the runtime checks for sets)."""
    items = prop.get("items") or {}
    types = items.get("type")
    types = types if isinstance(types, list) else [types]
    return "$ref" not in items and "allOf" not in items and not {"object", "array"} & set(types)


def effective_patch_tags(schema, prop_name, row, prop):
    """The patch tags the runtime gives a property: override, else derived from the list type."""
    if (schema, prop_name) in PATCH_OVERRIDES:
        return PATCH_OVERRIDES[(schema, prop_name)]
    list_type, map_keys = (row[2], row[3]) if row else (None, [])
    if list_type == "map":
        return ("merge", map_keys[0])
    if list_type == "set" and holds_scalars(prop):
        return ("merge", None)
    return NO_PATCH_TAGS


def property_differences(schema, prop_name, prop, row):
    """Differences between one upstream property and what the runtime will emit for it."""
    list_type, map_keys, map_type = (row[2], row[3], row[4]) if row else (None, [], None)
    # Compared as published: kube writes a list or map type only where its
    # Go types tag one, and so must we (tests/tests/openapi.rs checks it).
    ours = {
        "x-kubernetes-list-type": list_type,
        "x-kubernetes-list-map-keys": map_keys or None,
        "x-kubernetes-map-type": map_type,
    }
    ours["x-kubernetes-patch-strategy"], ours["x-kubernetes-patch-merge-key"] = effective_patch_tags(
        schema, prop_name, row, prop)
    return [
        f"{schema}.{prop_name}: {key} upstream {prop.get(key)!r}, ours {value!r}"
        for key, value in ours.items()
        if prop.get(key) != value
    ]


def check_against(path, rows, kinds):
    """Prints how the generated metadata differs from the upstream spec at `path`; True if it does not."""
    upstream = upstream_schemas(path)
    by_key = {(row[0], row[1]): row for row in rows}
    problems = []
    for schema, definition in sorted(upstream.items()):
        for prop_name, prop in sorted((definition.get("properties") or {}).items()):
            row = by_key.get((schema, prop_name))
            if (schema, prop_name) in IGNORED_UPSTREAM:
                continue
            if row or any(key.startswith("x-kubernetes-") for key in prop):
                problems += property_differences(schema, prop_name, prop, row)
        atomic = definition.get("x-kubernetes-map-type") == "atomic"
        if atomic != (schema in ATOMIC_STRUCTS):
            problems.append(f"{schema}: struct map-type atomic upstream {atomic}")
    for schema, group, version, kind, _ in kinds:
        gvks = upstream.get(schema, {}).get("x-kubernetes-group-version-kind", [])
        if {"group": group, "kind": kind, "version": version} not in gvks:
            problems.append(f"{schema}: group/version/kind {group}/{version}/{kind} not upstream")
    for problem in problems:
        print(problem)
    print(f"{len(problems)} difference(s) from {path}")
    return not problems


def main(argv):
    """Read k8s-openapi, write list_meta.rs (and optionally check it against upstream)."""
    root, check = parse_args(argv)
    definitions = load_definitions(source_root(root))
    rows = []
    for definition in definitions.values():
        rows.extend(field_meta(definitions, definition))
    rows = apply_list_overrides(rows)
    kinds = kind_rows(definitions)
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(render(rows, kinds))
    print(f"wrote {len(rows)} field rows and {len(kinds)} kinds to {OUTPUT}")
    if check and not check_against(check, rows, kinds):
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv)
