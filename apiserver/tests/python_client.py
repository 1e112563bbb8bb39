#!/usr/bin/env python3
"""Drives wasmctrl's embedded API server with the official Python
`kubernetes` client, unchanged: create a namespace and pods, list by label
selector, patch (strategic merge and JSON patch), watch with a timeout,
delete, and check the Status of a missing object.

Usage: python3 tests/python_client.py KUBECONFIG

Run by `tests/apiserver_kubectl.rs` against an in-process server. Exits
non-zero (with the failing assertion) on any mismatch and prints
`python client: ok` on success.
"""

import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "py-client"


def pod(name, app):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": app}),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="main",
                    image="nginx:1.27",
                    resources=client.V1ResourceRequirements(limits={"cpu": "1"}),
                )
            ]
        ),
    )


def main(kubeconfig):
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()

    ns = v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    assert ns.metadata.name == NS and ns.metadata.uid, ns.metadata

    web = v1.create_namespaced_pod(NS, pod("web-1", "web"))
    assert web.status.phase == "Pending", web.status
    # Requests defaulted from limits, as the real server does.
    assert web.spec.containers[0].resources.requests == {"cpu": "1"}, web.spec
    v1.create_namespaced_pod(NS, pod("db-1", "db"))
    try:
        v1.create_namespaced_pod(NS, pod("web-1", "web"))
        raise AssertionError("second create of web-1 must fail")
    except ApiException as e:
        assert e.status == 409 and "AlreadyExists" in e.body, (e.status, e.body)

    listed = v1.list_namespaced_pod(NS, label_selector="app=web")
    assert [p.metadata.name for p in listed.items] == ["web-1"], listed.items
    listed = v1.list_namespaced_pod(NS, label_selector="app in (web,db)")
    assert sorted(p.metadata.name for p in listed.items) == ["db-1", "web-1"]
    rv = listed.metadata.resource_version

    # A dict body is sent as a strategic merge patch, a list as a JSON patch.
    patched = v1.patch_namespaced_pod("web-1", NS, {"metadata": {"labels": {"tier": "front"}}})
    assert patched.metadata.labels == {"app": "web", "tier": "front"}, patched.metadata.labels
    patched = v1.patch_namespaced_pod(
        "web-1",
        NS,
        [{"op": "add", "path": "/metadata/annotations", "value": {"owner": "py"}}],
    )
    assert patched.metadata.annotations == {"owner": "py"}, patched.metadata.annotations

    # Watching from the list's resourceVersion replays both patches, and the
    # server ends the stream after timeoutSeconds.
    started = time.monotonic()
    events = [
        (e["type"], e["object"].metadata.name, e["object"].metadata.resource_version)
        for e in watch.Watch().stream(
            v1.list_namespaced_pod,
            NS,
            label_selector="app=web",
            resource_version=rv,
            timeout_seconds=2,
        )
    ]
    took = time.monotonic() - started
    assert [(t, n) for t, n, _ in events] == [("MODIFIED", "web-1")] * 2, events
    assert events[-1][2] == patched.metadata.resource_version, events
    assert 1.5 <= took < 15, took

    deleted = v1.delete_namespaced_pod("web-1", NS)
    assert deleted.metadata.name == "web-1", deleted
    try:
        v1.read_namespaced_pod("web-1", NS)
        raise AssertionError("web-1 must be gone")
    except ApiException as e:
        assert e.status == 404 and '"reason":"NotFound"' in e.body.replace(" ", ""), e.body
    remaining = v1.list_namespaced_pod(NS)
    assert [p.metadata.name for p in remaining.items] == ["db-1"], remaining.items

    v1.delete_namespace(NS)
    print("python client: ok")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
