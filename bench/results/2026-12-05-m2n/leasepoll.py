"""Polls the HA Lease every 100 ms; on SIGTERM prints the longest time the holder's renewTime stood still."""
import base64, json, os, signal, ssl, sys, tempfile, time, urllib.request

kc = json.load(open(os.environ["KUBECONFIG"]))
cluster, user = kc["clusters"][0]["cluster"], kc["users"][0]["user"]
d = tempfile.mkdtemp()
def f(name, b64):
    p = os.path.join(d, name); open(p, "wb").write(base64.b64decode(b64)); return p
ctx = ssl.create_default_context(cafile=f("ca", cluster["certificate-authority-data"]))
ctx.load_cert_chain(f("crt", user["client-certificate-data"]), f("key", user["client-key-data"]))
url = cluster["server"] + "/apis/coordination.k8s.io/v1/namespaces/default/leases/stakater-reloader-lock"
last, last_change, worst, holders, polls = None, None, 0.0, [], 0
def done(*_):
    print(json.dumps({"polls": polls, "longest_renew_gap_s": round(worst, 3), "holders": holders}))
    sys.exit(0)
signal.signal(signal.SIGTERM, done)
while True:
    try:
        spec = json.load(urllib.request.urlopen(url, context=ctx, timeout=2))["spec"]
        polls += 1
        now = time.monotonic()
        key = (spec.get("holderIdentity"), spec.get("renewTime"))
        if key[0] and (not holders or holders[-1] != key[0]):
            holders.append(key[0])
        if key != last:
            if last_change is not None and last is not None and last[0] == key[0]:
                worst = max(worst, now - last_change)
            last, last_change = key, now
    except Exception:
        pass
    time.sleep(0.1)
