#!/usr/bin/env bash
# Known failing case of fault 5 (bench/results/RELIABILITY-HISTORY.md, "Found and fixed"): a change made while the
# controller's Role is missing is never
# applied after the Role is restored. Run from the repository root on a fresh control plane:
#   target/debug/testenv run --name repro -- bench/repro/role-403.sh
set -euo pipefail
RELOADER=${RELOADER:-target/release/reloader}
WORK=$(mktemp -d)
for ns in a b; do kubectl create ns $ns >/dev/null; done
kubectl -n a create serviceaccount reloader >/dev/null
for ns in a b; do
  kubectl -n $ns create role reloader --verb=get,list,watch --resource=configmaps,secrets >/dev/null
  kubectl -n $ns patch role reloader --type=json -p '[
    {"op":"add","path":"/rules/-","value":{"apiGroups":["apps"],"resources":["deployments","statefulsets","daemonsets"],"verbs":["get","list","watch","patch","update"]}},
    {"op":"add","path":"/rules/-","value":{"apiGroups":["batch"],"resources":["cronjobs","jobs"],"verbs":["get","list","watch","patch","create","delete"]}},
    {"op":"add","path":"/rules/-","value":{"apiGroups":["","events.k8s.io"],"resources":["events"],"verbs":["create","patch"]}}]' >/dev/null
  kubectl -n $ns create rolebinding reloader --role=reloader --serviceaccount=a:reloader >/dev/null
done
kubectl -n b create configmap cfg --from-literal=k=1 >/dev/null
kubectl -n b apply -f - >/dev/null <<'Y'
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, annotations: {reloader.stakater.com/auto: "true"}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: x, envFrom: [{configMapRef: {name: cfg}}]}]}
Y
TOKEN=$(kubectl -n a create token reloader)
SERVER=$(kubectl config view --raw -o jsonpath='{.clusters[0].cluster.server}')
CA=$(kubectl config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
cat > $WORK/sa.kubeconfig <<K
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: $SERVER, certificate-authority-data: $CA}}]
users: [{name: u, user: {token: $TOKEN}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
K
KUBECONFIG=$WORK/sa.kubeconfig $RELOADER --namespaces=a,b --metrics-addr=127.0.0.1:0 > $WORK/reloader.log 2>&1 &
PID=$!
trap 'kill $PID' EXIT
until grep -q "watches synced" $WORK/reloader.log; do sleep 0.2; done
env_value() { kubectl -n b get deploy web -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="STAKATER_CFG_CONFIGMAP")].value}'; }
echo "1. synced; STAKATER_CFG_CONFIGMAP='$(env_value)'"
kubectl -n b patch configmap cfg --type=merge -p '{"data":{"k":"2"}}' >/dev/null; sleep 3
echo "2. k=2 while the Role is present: STAKATER_CFG_CONFIGMAP='$(env_value)'"
kubectl -n b delete role reloader >/dev/null; sleep 1
kubectl -n b patch configmap cfg --type=merge -p '{"data":{"k":"3"}}' >/dev/null; sleep 3
echo "3. k=3 with the Role deleted: STAKATER_CFG_CONFIGMAP='$(env_value)'"
grep -o "Rolling upgrade failed, not retrying: patching Deployment b/web[^:]*: ApiError: [^:]*forbidden" $WORK/reloader.log | head -1
kubectl -n b create role reloader --verb=get,list,watch --resource=configmaps,secrets >/dev/null
kubectl -n b patch role reloader --type=json -p '[{"op":"add","path":"/rules/-","value":{"apiGroups":["apps"],"resources":["deployments"],"verbs":["get","list","watch","patch","update"]}}]' >/dev/null
sleep 60
echo "4. Role restored 60 s ago: STAKATER_CFG_CONFIGMAP='$(env_value)' (the k=3 hash is $(printf 'k=3' | sha1sum | cut -c1-40))"
kubectl -n b patch configmap cfg --type=merge -p '{"data":{"k":"4"}}' >/dev/null; sleep 3
echo "5. k=4 after the restore: STAKATER_CFG_CONFIGMAP='$(env_value)' (the k=4 hash is $(printf 'k=4' | sha1sum | cut -c1-40))"
