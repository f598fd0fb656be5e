#!/usr/bin/env bash
# Builds the real-world template corpus the corpus tests read, in the folder DIR:
#   tests/corpus/fetch.sh DIR && CONVERGENCE_CORPUS_DIR=DIR make test
# Sources (Apache License 2.0), at the commits the tests were written against:
#   heat-templates/  openstack/heat-templates at 29b8ce6c5ea5, folder hot/
#   magnum/          openstack/magnum at the parent of 31b84327db88 (the last commit with its
#                    Heat driver), its drivers' templates
#   tripleo/         openstack/tripleo-heat-templates at 04f9e4f73a7f, folder deployment/
set -euo pipefail
dest=${1:?usage: fetch.sh DIR}
base=${CORPUS_GIT_BASE:-https://opendev.org/openstack}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fetch() {  # fetch REPO COMMIT PATH... : those paths of REPO at COMMIT into $work/REPO
    local repo=$1 commit=$2
    shift 2
    git clone --quiet --filter=blob:none --no-checkout "$base/$repo" "$work/$repo"
    git -C "$work/$repo" sparse-checkout set --no-cone "$@"
    git -C "$work/$repo" checkout --quiet "$commit"
}

fetch heat-templates 29b8ce6c5ea5d2f97ccb5752a04cf4c101185457 /hot/
fetch magnum 31b84327db8867ce67df6b7cf0189ad46e8a4f87~1 \
    /magnum/drivers/common/templates/ /magnum/drivers/k8s_fedora_coreos_v1/templates/
fetch tripleo-heat-templates 04f9e4f73a7ff72c96852a6d6250cd71509a03d2 /deployment/

mkdir -p "$dest/heat-templates" "$dest/magnum" "$dest/tripleo"
cp -R "$work/heat-templates/hot" "$dest/heat-templates/"
mkdir -p "$dest/magnum/magnum"
cp -R "$work/magnum/magnum/drivers" "$dest/magnum/magnum/"
cp -R "$work/tripleo-heat-templates/deployment" "$dest/tripleo/"
echo "corpus ready: CONVERGENCE_CORPUS_DIR=$dest"
