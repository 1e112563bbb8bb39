#!/usr/bin/env python3
"""Extracts from a kube-apiserver's /openapi/v3 documents what server-side
apply and strategic merge patch need (list types, list-map keys and their
defaults, map types, patch strategies and merge keys, and the references
between schemas), as `openapi-lists.json`.

usage: extract_list_types.py OPENAPI_V3_DIR > openapi-lists.json
(OPENAPI_V3_DIR: files named like `kubectl get --raw /openapi/v3/<path>`,
with `/` as `_`; the `example.com` CRD documents are skipped)."""
import glob, json, os, sys

src = sys.argv[1]
schemas, kinds = {}, {}
for path in sorted(glob.glob(os.path.join(src, "ap*_v*.json"))):
    if "example.com" in path:
        continue
    doc = json.load(open(path))
    schemas.update(doc.get("components", {}).get("schemas", {}))

def ref(s):
    if not isinstance(s, dict):
        return None
    r = s.get("$ref") or next((a.get("$ref") for a in s.get("allOf", []) if "$ref" in a), None)
    return r.rsplit("/", 1)[1] if r else None

out = {}
for name, s in sorted(schemas.items()):
    for gvk in s.get("x-kubernetes-group-version-kind", []):
        if name.startswith("io.k8s.apimachinery"):
            continue  # DeleteOptions, WatchEvent … list every group
        kinds["%s/%s/%s" % (gvk["group"], gvk["version"], gvk["kind"])] = name
    entry = {}
    if s.get("x-kubernetes-map-type") == "atomic":
        entry["atomic"] = True
    props = {}
    for field, p in s.get("properties", {}).items():
        e = {}
        if ref(p):
            e["ref"] = ref(p)
        if p.get("type") == "array" and ref(p.get("items")):
            e["items"] = ref(p["items"])
        if p.get("type") == "object" and ref(p.get("additionalProperties")):
            e["values"] = ref(p["additionalProperties"])
        for k, short in [("x-kubernetes-list-type", "listType"), ("x-kubernetes-map-type", "mapType"),
                         ("x-kubernetes-patch-strategy", "patchStrategy"), ("x-kubernetes-patch-merge-key", "mergeKey")]:
            if k in p:
                e[short] = p[k]
        keys = p.get("x-kubernetes-list-map-keys")
        if keys:
            item = schemas.get(e.get("items"), {}).get("properties", {})
            # only string defaults name a key's value when an item omits it
            # (`protocol: TCP`); a required key's zero default does not
            default = lambda k: item.get(k, {}).get("default")
            e["keys"] = [[k, default(k) if isinstance(default(k), str) and default(k) else None] for k in keys]
        if p.get("type") == "array" and "listType" not in e:
            e["array"] = True
        if e:
            props[field] = e
    if props:
        entry["props"] = props
    if entry:
        out[name] = entry
json.dump({"kinds": kinds, "schemas": out}, sys.stdout, separators=(",", ":"), sort_keys=True)
