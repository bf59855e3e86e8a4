#!/usr/bin/env python3
"""The real node's cluster DNS records (tests/bed/node.sh): what kube-dns's watcher does for its
dnsmasq, for the one real control plane of the bed. CoreDNS and kube-dns are not packaged in
Debian, so the DNS server is Debian's dnsmasq and this script feeds it.

    cluster-dns.py API_URL TOKEN_FILE CA_FILE HOSTS_FILE DNSMASQ_PID_FILE

Once a second it lists the Services and Endpoints of the control plane and writes HOSTS_FILE:
  SERVICE.NS.svc.cluster.local            -> the ClusterIP, or each endpoint address when headless
                                             (not-ready ones too when publishNotReadyAddresses)
  HOSTNAME.SERVICE.NS.svc.cluster.local   -> the address of an endpoint that has a hostname (a
                                             StatefulSet's pod in its governing Service)
When the records change it replaces the file (a rename) and sends dnsmasq SIGHUP, which reads it
again. Nothing here leaves the machine: the API is on loopback.
"""

import json
import os
import signal
import ssl
import sys
import time
import urllib.request

DOMAIN = "cluster.local"


def get(url, token, ctx):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
        return json.load(r)


def records(services, endpoints):
    out = {}
    eps = {(e["metadata"]["namespace"], e["metadata"]["name"]): e for e in endpoints["items"]}
    for s in services["items"]:
        ns, name = s["metadata"]["namespace"], s["metadata"]["name"]
        spec = s.get("spec", {})
        fqdn = f"{name}.{ns}.svc.{DOMAIN}"
        ip = spec.get("clusterIP")
        if ip and ip != "None":
            out.setdefault(fqdn, set()).add(ip)
            continue
        for subset in eps.get((ns, name), {}).get("subsets") or []:
            addrs = list(subset.get("addresses") or [])
            if spec.get("publishNotReadyAddresses"):
                addrs += subset.get("notReadyAddresses") or []
            for a in addrs:
                out.setdefault(fqdn, set()).add(a["ip"])
                if a.get("hostname"):
                    out.setdefault(f"{a['hostname']}.{fqdn}", set()).add(a["ip"])
    return "".join(f"{ip} {name}\n" for name in sorted(out) for ip in sorted(out[name]))


def main():
    api, token_file, ca, hosts, pid_file = sys.argv[1:6]
    token = open(token_file).read().strip()
    ctx = ssl.create_default_context(cafile=ca)
    last = None
    while True:
        try:
            text = records(get(f"{api}/api/v1/services", token, ctx), get(f"{api}/api/v1/endpoints", token, ctx))
        except Exception as e:  # the control plane restarting: keep the last records
            print(f"cluster-dns: {e}", file=sys.stderr, flush=True)
            text = last
        if text is not None and text != last:
            with open(hosts + ".tmp", "w") as f:
                f.write(text)
            os.replace(hosts + ".tmp", hosts)
            try:
                os.kill(int(open(pid_file).read()), signal.SIGHUP)
            except (OSError, ValueError) as e:
                print(f"cluster-dns: dnsmasq not signalled: {e}", file=sys.stderr, flush=True)
            last = text
        time.sleep(1)


if __name__ == "__main__":
    main()
