"""bench/backlog: a backlog of bad messages ahead of one real spot warning (issue 36).

Per run: `spotdrain sim serve` (the cluster, and the queue unless --moto), one `spotdrain controller`
receiving from the queue. Once the controller is idle on its long polls it is stopped (SIGSTOP, as a
controller that was down or busy while a misrouted EventBridge rule filled the queue); N bad messages are sent
(SendMessageBatch: half not JSON, half S3 events that are no notice), then one EC2 Spot Instance Interruption
Warning for the node spot-a; the controller is resumed (SIGCONT) right after that send. Measured: seconds
from the warning's send to spot-a's cordon (the node watched every 5 ms), the controller's ReceiveMessage calls
in that time (its metrics), the lines it logged about bad messages (until its exit, summaries included), and
whether every bad message is still in the queue at the end.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import botocore.session

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCENARIO = os.path.join(ROOT, "bench", "backlog", "scenario.yaml")
SIM_KEY = ("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
REGION = "us-east-1"
S3_EVENT = json.dumps({
    "version": "0", "id": "s3-{i}", "detail-type": "Object Created", "source": "aws.s3",
    "account": "123456789012", "time": "2026-12-06T09:00:00Z", "region": REGION,
    "resources": ["arn:aws:s3:::bucket"], "detail": {"bucket": {"name": "bucket"}, "object": {"key": "k{i}"}},
})


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(seconds, what, fn, step=0.1):
    end = time.time() + seconds
    while time.time() < end:
        try:
            v = fn()
            if v:
                return v
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(step)
    raise SystemExit(f"bench/backlog: {what} did not happen within {seconds} s")


def get_json(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def metric(text, name, labels=None):
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        if head != name and not head.startswith(name + "{"):
            continue
        if labels and not all(f'{k}="{v}"' in head for k, v in labels.items()):
            continue
        total += float(value)
    return total


def sqs_client(endpoint, key):
    return botocore.session.get_session().create_client(
        "sqs", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=key[0], aws_secret_access_key=key[1])


def send_backlog(sqs, queue_url, n):
    def batch(start):
        entries = []
        for i in range(start, min(start + 10, n)):
            body = "this is not json %d" % i if i % 2 else S3_EVENT.replace("{i}", str(i))
            entries.append({"Id": "p%d" % (i - start), "MessageBody": body})
        r = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        if r.get("Failed"):
            raise SystemExit(f"bench/backlog: SendMessageBatch failed: {r['Failed'][:1]}")

    with ThreadPoolExecutor(max_workers=8) as ex:
        list(ex.map(batch, range(0, n, 10)))


def warning(instance_id, account):
    return json.dumps({
        "version": "0", "id": "bench-warning-%d" % time.time_ns(), "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": account, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": REGION, "resources": [f"arn:aws:ec2:{REGION}:{account}:instance/{instance_id}"],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"},
    })


def in_queue(sqs, queue_url):
    a = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    return int(a.get("ApproximateNumberOfMessages", 0)) + int(a.get("ApproximateNumberOfMessagesNotVisible", 0))


def run_once(args, n, tmp, moto):
    spotdrain = os.path.join(ROOT, os.environ.get("SPOTDRAIN", "build/spotdrain"))
    d = tempfile.mkdtemp(prefix=f"n{n}-", dir=tmp)
    procs = []
    try:
        sim = subprocess.Popen([spotdrain, "sim", "serve", SCENARIO, "--listen", "127.0.0.1:0",
                                "--endpoints-out", f"{d}/endpoints.json", "--kubeconfig-out", f"{d}/kubeconfig"],
                               stdout=open(f"{d}/sim.log", "w"), stderr=subprocess.STDOUT)
        procs.append(sim)
        ep = wait_for(15, "the simulator's start", lambda: json.load(open(f"{d}/endpoints.json")))
        k8s = ep["kubernetes"]
        if moto:
            key = (moto["key"], moto["secret"])
            sqs = sqs_client(moto["url"], key)
            queue_url = sqs.create_queue(QueueName=f"backlog-{os.getpid()}-{n}-{time.time_ns()}")["QueueUrl"]
            account = "123456789012"
        else:
            key = SIM_KEY
            sqs = sqs_client(ep["sqs"], key)
            queue_url = ep["queue_url"]
            account = queue_url.rstrip("/").split("/")[-2]
        port = free_port()
        with open(f"{d}/config.yaml", "w") as f:
            if args.receivers:
                f.write(f"controller:\n  receivers: {args.receivers}\n")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key[0], AWS_SECRET_ACCESS_KEY=key[1], AWS_REGION=REGION,
                   POD_NAMESPACE="default", POD_NAME="bench-backlog")
        # SPOTDRAIN_CONTROLLER: another build's controller against this simulator (a before/after comparison).
        cmd = [os.environ.get("SPOTDRAIN_CONTROLLER", spotdrain), "controller", "--queue-url", queue_url,
               "--kubeconfig", f"{d}/kubeconfig", "--config", f"{d}/config.yaml",
               "--metrics-listen", f"127.0.0.1:{port}", "--no-leader-election"]
        if moto:
            cmd += ["--sqs-endpoint", moto["url"]]
        log = open(f"{d}/controller.log", "w")
        ctl = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(ctl)
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        wait_for(30, "the controller's readiness",
                 lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200)
        node = get_json(f"{k8s}/api/v1/nodes/spot-a")
        instance_id = node["spec"]["providerID"].rsplit("/", 1)[-1]
        time.sleep(1.5)  # every long poll sent and waiting
        before = urllib.request.urlopen(metrics_url, timeout=5).read().decode()

        os.kill(ctl.pid, signal.SIGSTOP)
        lines_at_send = sum(1 for _ in open(f"{d}/controller.log"))
        t0 = time.time()
        send_backlog(sqs, queue_url, n)
        fill = time.time() - t0
        sqs.send_message(QueueUrl=queue_url, MessageBody=warning(instance_id, account))
        sent = time.time()
        os.kill(ctl.pid, signal.SIGCONT)

        def cordoned():
            return get_json(f"{k8s}/api/v1/nodes/spot-a").get("spec", {}).get("unschedulable")

        wait_for(120, "spot-a's cordon", cordoned, step=0.005)
        cordon = time.time() - sent
        time.sleep(6)  # the metrics are turned into the registry every few seconds; the batches settle
        after = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
        receives = metric(after, "spotdrain_sqs_receives_total") - metric(before, "spotdrain_sqs_receives_total")
        unread = metric(after, "spotdrain_sqs_messages_malformed_total") - metric(
            before, "spotdrain_sqs_messages_malformed_total")
        left = in_queue(sqs, queue_url)
        ctl.send_signal(signal.SIGTERM)
        ctl.wait(timeout=30)
        log.close()
        lines = open(f"{d}/controller.log").read().splitlines()
        bad = [l for l in lines[lines_at_send:] if "left in the queue" in l]
        return {"n": n, "fill_s": fill, "cordon_s": cordon, "receives": int(receives), "unread": int(unread),
                "log_lines_bad": len(bad), "log_lines": len(lines) - lines_at_send, "in_queue": left,
                "poison_kept": left >= n}
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--receivers", type=int, default=0, help="controller.receivers (default: its default)")
    ap.add_argument("--moto", metavar="DIR", help="a running moto_server's directory (tests/realk8s/moto/lib.sh "
                    "moto_start DIR): its moto.url and credentials.env")
    ap.add_argument("n", type=int, nargs="*", default=[0, 2000, 20000])
    args = ap.parse_args()
    moto = None
    if args.moto:
        env = dict(l.strip().split("=", 1) for l in open(os.path.join(args.moto, "credentials.env")) if "=" in l)
        moto = {"url": open(os.path.join(args.moto, "moto.url")).read().strip(),
                "key": env["AWS_ACCESS_KEY_ID"].strip("'\""), "secret": env["AWS_SECRET_ACCESS_KEY"].strip("'\"")}
    results = []
    keep = os.environ.get("BACKLOG_KEEP")  # a directory to keep each run's logs in
    with tempfile.TemporaryDirectory(prefix="spotdrain-bench-backlog.") as tmp:
        tmp = keep or tmp
        for n in args.n:
            for r in range(args.runs):
                print(f"bench/backlog: N={n} run {r + 1}/{args.runs} ({'moto' if moto else 'sim'})", file=sys.stderr)
                results.append(run_once(args, n, tmp, moto))
    load = open("/proc/loadavg").read().split()[:3]
    print(f"spotdrain controller behind a backlog ({'moto ' + moto['url'] if moto else 'the simulator'}'s SQS), "
          f"receivers {args.receivers or 'default'}, load average {' '.join(load)}")
    print(f"{'N':>6} {'fill s':>7} {'send->cordon s':>15} {'receives':>9} {'unread':>7} {'log lines (bad)':>16} "
          f"{'in queue after':>15}")
    for x in results:
        print(f"{x['n']:>6} {x['fill_s']:>7.1f} {x['cordon_s']:>15.3f} {x['receives']:>9} {x['unread']:>7} "
              f"{x['log_lines']:>8} ({x['log_lines_bad']:>3}) {x['in_queue']:>15}")
    bad = [x for x in results if not x["poison_kept"]]
    if bad:
        print(f"bench/backlog: bad messages lost from the queue in {len(bad)} run(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
