"""The official Kubernetes Python client (Debian's python3-kubernetes) against `spotdrain sim serve`.

Usage: python_client.py KUBECONFIG. The scenario is examples/drain-8.yaml at real time: 8 pods of shop/web on
spot-a under a PDB of maxUnavailable 1, replacements Ready 3 s after they are scheduled."""
import datetime
import re
import sys
import threading
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "shop"


def check(cond, what):
    if not cond:
        print("FAIL: " + what, file=sys.stderr)
        sys.exit(1)
    print("ok: " + what)


def running_pods(v1):
    return [p for p in v1.list_namespaced_pod(NS).items
            if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]


def paging(v1):
    names, token, pages = [], None, 0
    while True:
        kw = {"limit": 3}
        if token:
            kw["_continue"] = token
        page = v1.list_namespaced_pod(NS, **kw)
        pages += 1
        names += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if not token:
            break
    check(pages == 3 and len(names) == 8 and len(set(names)) == 8,
          "limit=3 + continue: 8 pods in 3 pages (%d in %d)" % (len(names), pages))


def evictions_and_watch(v1):
    listed = v1.list_namespaced_pod(NS)
    rv = listed.metadata.resource_version
    pods = [p.metadata.name for p in listed.items]
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pods[0], namespace=NS))
    v1.create_namespaced_pod_eviction(pods[0], NS, body)
    print("ok: eviction of %s answered 201" % pods[0])
    try:
        v1.create_namespaced_pod_eviction(
            pods[1], NS, client.V1Eviction(metadata=client.V1ObjectMeta(name=pods[1], namespace=NS)))
        check(False, "second eviction refused")
    except ApiException as e:
        check(e.status == 429 and "disruption budget" in e.body,
              "second eviction refused by the PDB: 429 (%s)" % e.status)

    seen = []
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=15):
        pod = ev["object"]
        seen.append((ev["type"], pod.metadata.name, pod.metadata.deletion_timestamp is not None))
        if ev["type"] == "DELETED" and pod.metadata.name == pods[0]:
            w.stop()
    check(("MODIFIED", pods[0], True) in seen, "watch from the list's resourceVersion: the evicted pod terminating")
    check(any(t == "ADDED" and n not in pods for t, n, _ in seen), "watch: the replacement ADDED")
    check(any(t == "DELETED" and n == pods[0] for t, n, _ in seen), "watch: the evicted pod DELETED")


def lease(coord):
    now = datetime.datetime.now(datetime.timezone.utc)
    spec = client.V1LeaseSpec(holder_identity="python-a", lease_duration_seconds=15, acquire_time=now,
                              renew_time=now)
    created = coord.create_namespaced_lease(NS, client.V1Lease(metadata=client.V1ObjectMeta(name="py"), spec=spec))
    check(created.spec.holder_identity == "python-a", "lease created")
    got = coord.read_namespaced_lease("py", NS)
    check(got.spec.lease_duration_seconds == 15, "lease read back")
    stale = got.metadata.resource_version
    got.spec.holder_identity = "python-b"
    got.spec.renew_time = datetime.datetime.now(datetime.timezone.utc)
    replaced = coord.replace_namespaced_lease("py", NS, got)
    check(replaced.spec.holder_identity == "python-b" and replaced.metadata.resource_version != stale,
          "lease replaced")
    got.metadata.resource_version = stale
    try:
        coord.replace_namespaced_lease("py", NS, got)
        check(False, "replace with a stale resourceVersion refused")
    except ApiException as e:
        check(e.status == 409, "replace with a stale resourceVersion: 409")


def logs(v1):
    pod = running_pods(v1)[0].metadata.name
    text = v1.read_namespaced_pod_log(pod, NS)
    lines = text.splitlines()
    check("starting on node" in lines[0] and "ready: listening" in lines[1] and len(lines) > 100,
          "log of %s: %d lines from its start" % (pod, len(lines)))
    tail = v1.read_namespaced_pod_log(pod, NS, tail_lines=3, container="app")
    check(len(tail.splitlines()) == 3 and tail.splitlines()[0] in lines, "tail_lines=3")
    since = v1.read_namespaced_pod_log(pod, NS, since_seconds=40).splitlines()
    check(1 <= len(since) <= 4 and not any("starting" in s for s in since), "since_seconds=40: %d lines" % len(since))
    stamped = v1.read_namespaced_pod_log(pod, NS, tail_lines=1, timestamps=True)
    stamp, rest = stamped.split(" ", 1)
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z", stamp) and rest.startswith("served "),
          "timestamps=true: %s" % stamped.strip())
    try:
        v1.read_namespaced_pod_log(pod, NS, container="nope")
        check(False, "an unknown container refused")
    except ApiException as e:
        check(e.status == 400, "an unknown container: 400")

    # follow on a live pod: what is there comes at once; the read is bounded by the client.
    resp = v1.read_namespaced_pod_log(pod, NS, follow=True, tail_lines=2, _preload_content=False,
                                      _request_timeout=(5, 2))
    first = resp.read(64)
    resp.release_conn()
    check(len(first) > 0, "follow: the tail arrives at once")

    # follow on a pod being deleted: the stream carries its SIGTERM and its exit, then ends.
    v1.delete_namespaced_pod(pod, NS)
    got, done = [], threading.Event()

    def reader():
        r = v1.read_namespaced_pod_log(pod, NS, follow=True, tail_lines=1, _preload_content=False,
                                       _request_timeout=(5, 20))
        for chunk in r.stream(256):
            got.append(chunk.decode())
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    check(done.wait(20), "follow ends when the container exits")
    text = "".join(got)
    check("received SIGTERM" in text and text.rstrip().endswith("drained, exiting with status 0"),
          "follow: SIGTERM then the graceful exit (%r)" % text[-80:])


def cordon(v1):
    node = v1.patch_node("od-2", {"spec": {"unschedulable": True}})
    check(node.spec.unschedulable is True, "patch_node: od-2 cordoned")
    check(v1.read_node("od-2").spec.unschedulable is True, "read_node: od-2 unschedulable")
    node = v1.patch_node("od-2", {"spec": {"unschedulable": None}})
    check(not node.spec.unschedulable, "patch_node: od-2 uncordoned")


def main():
    config.load_kube_config(config_file=sys.argv[1])
    v1 = client.CoreV1Api()
    paging(v1)
    evictions_and_watch(v1)
    lease(client.CoordinationV1Api())
    cordon(v1)
    # Wait for the PDB to settle (the replacement Ready) before taking a pod's log and deleting it.
    time.sleep(4)
    logs(v1)
    print("python client: all checks passed")


if __name__ == "__main__":
    main()
