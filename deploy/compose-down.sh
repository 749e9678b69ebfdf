#!/bin/sh
# Tears down a compose deployment started by compose-up.sh (same settings,
# same project name). Arguments go to `docker-compose down`:
#
#   deploy/compose-down.sh              # containers and network; etcd data kept
#   deploy/compose-down.sh -v           # and the etcd volumes
#   deploy/compose-down.sh -v --rmi all # and the images
set -eu
. "$(dirname "$0")/compose-env.sh"
# Both files, so the extra etcd members of the HA variant go too.
# Every variant's services and volumes; the audit variant needs a policy
# path to parse, never read on the way down.
export KUBECHAIN_AUDIT_POLICY="${KUBECHAIN_AUDIT_POLICY:-/dev/null}"
compose_files="-f $deploy/docker-compose.yml -f $deploy/docker-compose.ha.yml -f $deploy/docker-compose.audit.yml"
compose down --remove-orphans "$@"
# The launcher's image (for `kubechain addons`) is built beside the services' images.
case " $* " in
    *" --rmi "*) docker image rm -f "kubechain-cli:$KUBECHAIN_IMAGE_TAG" >/dev/null 2>&1 || true ;;
esac
