#!/bin/sh
# Installs tank's build and test dependencies (Debian packages) when one of
# their headers or tools is missing.  Safe to run repeatedly: it does nothing
# when everything is present.  Needs root (or sudo) only when it installs.
set -eu

need=""
check() { # check FILE PACKAGE
	[ -e "$1" ] || need="$need $2"
}
check /usr/include/ev.h               libev-dev
check /usr/include/msgpack.h          libmsgpack-dev
check /usr/include/lmdb.h             liblmdb-dev
check /usr/include/libfyaml.h         libfyaml-dev
check /usr/include/criterion/criterion.h libcriterion-dev
# libcurl's header lives under the multiarch directory
curl_h=no
for f in /usr/include/curl/curl.h /usr/include/*/curl/curl.h; do
	[ -e "$f" ] && curl_h=yes
done
[ $curl_h = yes ] || need="$need libcurl4-openssl-dev"
check /usr/bin/pkg-config             pkg-config
check /usr/bin/mdb_stat               lmdb-utils
check /bin/busybox                    busybox-static
# tankd --http (obs/obs_http.h).  It and libcurl are loaded when first
# used (common/tank_dl.h): their -dev packages bring the headers the build
# needs and the libraries tankd loads.
check /usr/include/microhttpd.h       libmicrohttpd-dev
# The cluster's tests (tests/cluster/, docs/cluster.md) start a real etcd.
check /usr/bin/etcd                   etcd-server
# The web page's tests drive a real headless browser (tests/obs/).
check /usr/bin/chromium               chromium
# `sh scripts/deps.sh fuzz`: also what `make fuzz` needs (clang and its
# libFuzzer runtime).
if [ "${1:-}" = fuzz ]; then
	command -v clang >/dev/null 2>&1 || need="$need clang"
fi

[ -z "$need" ] && exit 0

echo "deps: installing:$need" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $need >&2
