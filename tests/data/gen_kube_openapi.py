#!/usr/bin/env python3
"""Regenerate `kube-1.33-openapi.json`: kube-apiserver 1.33's OpenAPI, reduced.

Input
    A directory of kube's published group-version documents, in either
    layout kube uses: `api/openapi-spec/v3/apis__apps__v1_openapi.json`
    (kubernetes/kubernetes) or `api/v1.json`, `apis/apps/v1.json`
    (kubectl-validate's copy of a release branch's `api/openapi-spec/v3`).

        python3 tests/data/gen_kube_openapi.py DIR [SOURCE-NOTE]

    Only the group-versions of `kube-1.33-discovery.json` (the ones kube
    serves by default) are kept. Standard library only; the output is sorted
    and depends only on the input.

The reduction (`tests/tests/openapi.rs` applies the same one to what
kubechain serves; keep the two in step)
    paths:   path -> method -> {operationId, action, gvk ("group/version/Kind"),
             params (names, path-level and operation-level together, sorted),
             body (request media types), returns (the 200 response's schema)}
    schemas: name -> {type, format, required, x-kubernetes-* of the schema
             (group-version-kinds as "group/version/Kind", sorted),
             properties: name -> the property's type as one string
             ("string", "integer/int32", "[]@io.k8s…Container",
             "map[string]", "@io.k8s…ObjectMeta") or, when it carries
             x-kubernetes-* extensions, {"type": …, "x-kubernetes-…": …}}
    A schema's `$ref`, or an `allOf` holding one `$ref`, reads `@<name>`.
    Descriptions and defaults are left out.

    The v2 table is derived, not stored: kube builds `/openapi/v2` from the
    same definitions and routes (operationIds are equal; a v2 operation
    with a request body has it as a parameter named `body`).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "kube-1.33-openapi.json")
DISCOVERY = os.path.join(HERE, "kube-1.33-discovery.json")
REF = "#/components/schemas/"
METHODS = ["get", "put", "post", "delete", "options", "head", "patch"]


def ref_of(schema):
    """The referenced name of a `$ref` or a lone-`$ref` `allOf`, else None."""
    if "$ref" in schema:
        return schema["$ref"][len(REF):]
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return all_of[0]["$ref"][len(REF):]
    return None


def type_of(schema):
    """One property's type as one string."""
    ref = ref_of(schema)
    if ref is not None:
        return "@" + ref
    kind = schema.get("type", "")
    if kind == "array":
        return "[]" + type_of(schema.get("items", {}))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "map[" + type_of(schema["additionalProperties"]) + "]"
    if schema.get("format"):
        return kind + "/" + schema["format"]
    return kind or "any"


def extensions(schema):
    """The x-kubernetes-* keys of a schema, group-version-kinds as sorted strings."""
    out = {}
    for key, value in schema.items():
        if not key.startswith("x-kubernetes-"):
            continue
        if key == "x-kubernetes-group-version-kind":
            value = sorted("%s/%s/%s" % (g["group"], g["version"], g["kind"]) for g in value)
        out[key] = value
    return out


def reduce_schema(schema):
    out = {}
    for key in ("type", "format"):
        if key in schema:
            out[key] = schema[key]
    if schema.get("required"):
        out["required"] = sorted(schema["required"])
    out.update(extensions(schema))
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        ext = extensions(prop)
        properties[name] = dict(type=type_of(prop), **ext) if ext else type_of(prop)
    if properties:
        out["properties"] = properties
    return out


def reduce_operation(op, path_params):
    gvk = op.get("x-kubernetes-group-version-kind")
    params = {p["name"] for p in path_params + op.get("parameters", [])}
    body = sorted(op.get("requestBody", {}).get("content", {}))
    ok = op.get("responses", {}).get("200", {}).get("content", {})
    returns = [ref_of(c.get("schema", {})) for c in ok.values()]
    out = {
        "operationId": op.get("operationId", ""),
        "action": op.get("x-kubernetes-action", ""),
        "gvk": "%s/%s/%s" % (gvk["group"], gvk["version"], gvk["kind"]) if gvk else "",
        "params": sorted(params),
    }
    if body:
        out["body"] = body
    if returns and returns[0]:
        out["returns"] = returns[0]
    return out


def document_file(root, group_version):
    """kube's or kubectl-validate's file name of a group-version document."""
    if group_version == "v1":
        candidates = ["api__v1_openapi.json", "api/v1.json"]
    else:
        group, version = group_version.split("/")
        candidates = ["apis__%s__%s_openapi.json" % (group, version), "apis/%s/%s.json" % (group, version)]
    for name in candidates:
        path = os.path.join(root, name)
        if os.path.exists(path):
            return path
    sys.exit("no document for %s under %s" % (group_version, root))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    source = sys.argv[2] if len(sys.argv) > 2 else root
    with open(DISCOVERY) as f:
        group_versions = [gv["groupVersion"] for gv in json.load(f)["groupVersions"]]
    documents, schemas = {}, {}
    for gv in group_versions:
        with open(document_file(root, gv)) as f:
            doc = json.load(f)
        paths = {}
        for path, item in doc["paths"].items():
            shared = item.get("parameters", [])
            paths[path] = {m: reduce_operation(item[m], shared) for m in METHODS if m in item}
        names = sorted(doc["components"]["schemas"])
        for name in names:
            reduced = reduce_schema(doc["components"]["schemas"][name])
            if schemas.setdefault(name, reduced) != reduced:
                sys.exit("%s differs between documents (%s)" % (name, gv))
        key = "api/v1" if gv == "v1" else "apis/" + gv
        documents[key] = {"paths": paths, "schemas": names}
    table = {
        "about": "kube-apiserver 1.33's /openapi/v3 group-version documents for the group-versions "
        "of kube-1.33-discovery.json, reduced by gen_kube_openapi.py (see its doc comment for the "
        "form). Each document lists its paths and the names of its components.schemas; the "
        "schemas, equal in every document that holds them, are listed once.",
        "source": source,
        "documents": documents,
        "schemas": schemas,
    }
    with open(OUTPUT, "w") as f:
        f.write(dump(table))


def dump(table):
    """The table as JSON with one line per path and per schema (small diffs)."""
    line = lambda value: json.dumps(value, sort_keys=True, separators=(",", ":"))
    out = ["{"]
    out.append(' "about": %s,' % line(table["about"]))
    out.append(' "source": %s,' % line(table["source"]))
    out.append(' "documents": {')
    docs = sorted(table["documents"].items())
    for i, (key, doc) in enumerate(docs):
        out.append("  %s: {" % line(key))
        out.append('   "schemas": %s,' % line(doc["schemas"]))
        out.append('   "paths": {')
        paths = sorted(doc["paths"].items())
        for j, (path, item) in enumerate(paths):
            out.append("    %s: %s%s" % (line(path), line(item), "," if j + 1 < len(paths) else ""))
        out.append("   }")
        out.append("  }" + ("," if i + 1 < len(docs) else ""))
    out.append(" },")
    out.append(' "schemas": {')
    schemas = sorted(table["schemas"].items())
    for i, (name, schema) in enumerate(schemas):
        out.append("  %s: %s%s" % (line(name), line(schema), "," if i + 1 < len(schemas) else ""))
    out.append(" }")
    out.append("}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
