#!/usr/bin/env python3
"""Extracts from the Go types of k8s.io/api which fields of the built-in
kinds Go's encoding/json leaves out when they hold their zero value: the
fields tagged `omitempty` whose type is a bool, a number or a string (or a
named type over one), not a pointer, slice, map or struct. A real API
server never returns such a field as `false`, `0` or `""`. Written as
`go-omitempty.json`: per OpenAPI schema name, those fields' JSON names.

usage: extract_omitempty.py API_GIT_DIR TAG > go-omitempty.json
(API_GIT_DIR: a clone of https://github.com/kubernetes/api; TAG: the
release matching the server, v0.32.9 for 1.32)."""
import json, re, subprocess, sys

git, tag = sys.argv[1], sys.argv[2]
def run(*args):
    return subprocess.run(["git", "--git-dir", git, *args], check=True,
                          capture_output=True, text=True).stdout

BASIC = {"bool", "string", "int", "int8", "int16", "int32", "int64", "uint", "uint8",
         "uint16", "uint32", "uint64", "float32", "float64"}
files = [f for f in run("ls-tree", "-r", "--name-only", tag).split()
         if re.fullmatch(r"[a-z0-9]+/v[0-9a-z]+/[a-z_]+\.go", f)
         and not f.endswith("_test.go") and "generated" not in f]
sources = {f: run("show", f"{tag}:{f}") for f in files}
pkg = lambda f: f.rsplit("/", 1)[0]

# Named types over a basic type, per package.
named = {}
for f, src in sources.items():
    for name, under in re.findall(r"^type (\w+) (\w+)\s*$", src, re.M):
        if under in BASIC:
            named.setdefault(pkg(f), set()).add(name)

out = {}
for f, src in sources.items():
    p = pkg(f)
    imports = {}
    for alias, path in re.findall(r'^\s*(\w+)?\s*"k8s\.io/api/([a-z0-9]+/v[0-9a-z]+)"\s*$', src, re.M):
        imports[alias or path.rsplit("/", 1)[1]] = path
    for struct, body in re.findall(r"^type (\w+) struct \{\n(.*?)^\}", src, re.M | re.S):
        fields = []
        for typ, name in re.findall(r'^\s+\w+\s+([\w.]+)\s+`json:"(\w+),omitempty', body, re.M):
            if "." in typ:
                alias, t = typ.split(".", 1)
                basic = t in named.get(imports.get(alias, ""), set())
            else:
                basic = typ in BASIC or typ in named.get(p, set())
            if basic:
                fields.append(name)
        if fields:
            out["io.k8s.api.%s.%s" % (p.replace("/", "."), struct)] = sorted(fields)
json.dump(out, sys.stdout, separators=(",", ":"), sort_keys=True)
