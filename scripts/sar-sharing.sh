#!/bin/bash
# Measures how many requests share one SubjectAccessReview: a wardle server
# (memory storage) behind a fresh cluster, 300 GETs of flunders as one
# ServiceAccount through the front door, SubjectAccessReviews counted at the
# front door's metrics before and after.
set -eu
B=${KUBECHAIN_BIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)/target/debug}
D=$(mktemp -d /tmp/sar.XXXX)
$B/kubechain up --data-dir $D --port 17443 > $D/up.log 2>&1 &
UP=$!
trap "kill $UP; sleep 2; rm -rf $D" EXIT
for i in $(seq 60); do grep -q "export KUBECONFIG" $D/up.log && break; sleep 1; done
export KUBECONFIG=$D/kubeconfig
kubectl create namespace wardle >/dev/null
kubectl -n wardle create serviceaccount apiserver >/dev/null
TOKEN=$(kubectl -n wardle create token apiserver --duration=1h)
cat > $D/wardle.kubeconfig <<K
{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://127.0.0.1:17443","certificate-authority":"$D/pki/ca.crt"}}],
 "users":[{"name":"w","user":{"token":"$TOKEN"}}],"contexts":[{"name":"w","context":{"cluster":"c","user":"w"}}],"current-context":"w"}
K
$B/wardle-server --listen 127.0.0.1:18443 --kubeconfig $D/wardle.kubeconfig --cert-dir $D/wc --tls-san wardle-server.wardle.svc --client-ca-file $D/pki/ca.crt > $D/wardle.log 2>&1 &
W=$!
trap "kill $W $UP; sleep 2; rm -rf $D" EXIT
sleep 2
$B/kubechain register --group wardle.example.com --version v1alpha1 --address 127.0.0.1:18443 --service wardle/wardle-server --ca-file $D/wc/ca.crt --identity serviceaccount:wardle:apiserver >/dev/null
for i in $(seq 30); do [ "$(kubectl get apiservice v1alpha1.wardle.example.com -o jsonpath='{.status.conditions[0].status}')" = True ] && break; sleep 1; done
for i in $(seq 30); do kubectl api-resources --api-group=wardle.example.com -o name 2>/dev/null | grep -q flunders && break; sleep 1; done
kubectl create namespace team >/dev/null
kubectl -n team create serviceaccount reader >/dev/null
kubectl create clusterrole flunder-reader --verb=get,list --resource=flunders.wardle.example.com >/dev/null
kubectl -n team create rolebinding reader --clusterrole=flunder-reader --serviceaccount=team:reader >/dev/null
RT=$(kubectl -n team create token reader)
sars() { kubectl get --raw /metrics | grep '^apiserver_request_total' | grep 'resource="subjectaccessreviews"' | sed 's/.* //' | awk '{s+=$1} END {print s+0}'; }
before=$(sars)
start=$(date +%s)
for i in $(seq 300); do curl -s -o /dev/null -w '%{http_code}\n' --cacert $D/pki/ca.crt -H "Authorization: Bearer $RT" https://127.0.0.1:17443/apis/wardle.example.com/v1alpha1/namespaces/team/flunders; done | sort | uniq -c
end=$(date +%s)
after=$(sars)
echo "GETs: 300 in $((end-start)) s; SubjectAccessReviews at the front door: $((after-before))"
