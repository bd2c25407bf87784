#!/usr/bin/python3
"""A TLS front for the simulator's Kubernetes API: an agent in a cluster speaks HTTPS to the API server with
the cluster's CA, and the handshake, the verification and OpenSSL's state are part of its footprint; the
simulator serves plain HTTP on loopback. This terminates TLS (a certificate for IP 127.0.0.1 made here,
signed by a CA made here) and relays the bytes to the simulator.

usage: tls_front.py KUBECONFIG_IN KUBECONFIG_OUT DIR
Writes KUBECONFIG_OUT (the same user, server https://127.0.0.1:PORT, certificate-authority-data the CA) and
runs until killed. DIR receives the keys and certificates.
"""
import base64
import os
import socket
import ssl
import subprocess
import sys
import threading
import urllib.parse

import yaml


def make_certs(d):
    ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    key, csr, crt = os.path.join(d, "srv.key"), os.path.join(d, "srv.csr"), os.path.join(d, "srv.crt")
    ext = os.path.join(d, "srv.ext")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", ca_key, "-out", ca_crt, "-days", "1", "-subj", "/CN=bench-ca")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
        "-out", crt, "-days", "1", "-extfile", ext)
    return ca_crt, crt, key


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(conn, ctx, target):
    try:
        tls = ctx.wrap_socket(conn, server_side=True)
        up = socket.create_connection(target)
    except (OSError, ssl.SSLError):
        conn.close()
        return
    threading.Thread(target=pump, args=(up, tls), daemon=True).start()
    pump(tls, up)


def main():
    kc_in, kc_out, d = sys.argv[1:4]
    with open(kc_in) as f:
        kc = yaml.safe_load(f)
    url = urllib.parse.urlsplit(kc["clusters"][0]["cluster"]["server"])
    target = (url.hostname, url.port)
    ca_crt, crt, key = make_certs(d)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    port = lsock.getsockname()[1]
    cluster = kc["clusters"][0]["cluster"]
    cluster["server"] = f"https://127.0.0.1:{port}"
    with open(ca_crt, "rb") as f:
        cluster["certificate-authority-data"] = base64.b64encode(f.read()).decode()
    cluster.pop("insecure-skip-tls-verify", None)
    tmp = kc_out + ".tmp"
    with open(tmp, "w") as f:
        yaml.safe_dump(kc, f)
    os.rename(tmp, kc_out)
    while True:
        conn, _ = lsock.accept()
        threading.Thread(target=serve, args=(conn, ctx, target), daemon=True).start()


if __name__ == "__main__":
    main()
