#!/usr/bin/env bash
# Build the container images the test node runs, with no registry, as docker-archive tarballs in
# the kube cache (scripts/kube-cluster imports them into containerd):
#
#   busybox.tar   docker.io/library/busybox:1.36   Debian's static busybox (the default test job image)
#   pause.tar     localhost/jupyter-quota-pause:3.4.1   Kubernetes' own pause.c (the pod sandbox)
#   job-<hash>.tar localhost/jupyter-quota-job:latest   Debian bookworm (debootstrap) + Python 3.11 +
#                 torch (CPU) + ms-swift, at the versions scripts/install-swift.sh installs
#
#   scripts/build-kube-images.sh            # builds what is missing; prints timings
#   scripts/build-kube-images.sh --no-job   # only busybox and pause (seconds)
#   scripts/build-kube-images.sh --no-pause # busybox and the job image (before build-kube.sh is done)
#
# The job image is cached by a content hash of its inputs (this script, the [swift] extra of
# pyproject.toml, the torch pin, the Debian suite, pip's constraints): it is rebuilt only when one
# of them changes. deploy/job-image/Dockerfile builds the same image for a real cluster.
# Needs root (debootstrap, chroot), Debian's debootstrap, umoci, skopeo, busybox-static and gcc,
# and about 2.5 GB of scratch space; the job image takes ~8 min on 2 cores (mostly downloads).
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${JUPYTER_QUOTA_KUBE_CACHE:-$HOME/.cache/jupyter-quota/kube-1.20.2}"
IMAGES="$CACHE/images"
SUITE=bookworm
TORCH="torch==2.13.0"            # scripts/install-swift.sh's pin
BUSYBOX_REF="docker.io/library/busybox:1.36"
PAUSE_REF="localhost/jupyter-quota-pause:3.4.1"
JOB_REF="localhost/jupyter-quota-job:latest"
T0=$(date +%s)
log() { printf '[kube-images %4ss] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }

WANT_JOB=1 WANT_PAUSE=1
[ "${1:-}" = "--no-job" ] && WANT_JOB=0
[ "${1:-}" = "--no-pause" ] && WANT_PAUSE=0

mkdir -p "$IMAGES"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/jq-kube-images.XXXXXX")"
cleanup() {
  # A chroot's /proc, /dev/pts and the like must be unmounted before the tree goes.
  if [ -d "$WORK/rootfs" ]; then
    for m in $(awk -v r="$WORK/rootfs" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
      umount -l "$m" 2>/dev/null || true
    done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# A one-layer docker-archive from a directory: tar plus two JSON files, as `docker save` writes
# them (ctr imports it; no registry, no daemon). $1 rootfs, $2 image ref, $3 output, $4 config JSON.
pack() {
  local rootfs="$1" ref="$2" out="$3" config="$4" w sha
  w="$(mktemp -d "$WORK/pack.XXXXXX")"
  tar --numeric-owner --xattrs -C "$rootfs" --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* \
    -cf "$w/layer.tar" .
  sha="$(sha256sum "$w/layer.tar" | cut -d' ' -f1)"
  printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$config" "$sha" > "$w/config.json"
  printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$ref" > "$w/manifest.json"
  tar -C "$w" -cf "$out.tmp" manifest.json config.json layer.tar
  mv -f "$out.tmp" "$out"
  rm -rf "$w"
}

# 1. busybox: Debian's static busybox and its applets.
if [ ! -s "$IMAGES/busybox.tar" ]; then
  t=$(date +%s)
  bb=/bin/busybox
  file -L "$bb" 2>/dev/null | grep -q 'statically linked' || bb=/usr/bin/busybox
  r="$WORK/busybox"
  mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/proc" "$r/sys" "$r/dev"
  chmod 1777 "$r/tmp"
  cp "$bb" "$r/bin/busybox"
  for a in $("$r/bin/busybox" --list); do
    [ "$a" = busybox ] || ln -sf busybox "$r/bin/$a"
  done
  echo 'root:x:0:0:root:/root:/bin/sh' > "$r/etc/passwd"
  echo 'root:x:0:' > "$r/etc/group"
  pack "$r" "$BUSYBOX_REF" "$IMAGES/busybox.tar" '{"Env":["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["sh"]}'
  log "busybox image in $(( $(date +%s) - t ))s: $(du -h "$IMAGES/busybox.tar" | cut -f1)"
fi

# 2. pause: Kubernetes' own build/pause/linux/pause.c, kept by scripts/build-kube.sh.
if [ "$WANT_PAUSE" = 1 ] && [ ! -s "$IMAGES/pause.tar" ]; then
  src="$CACHE/bin/pause.c"
  if [ -f "$src" ]; then
    r="$WORK/pause"
    mkdir -p "$r"
    gcc -Os -static -DVERSION=v3.4.1-jupyter-quota -o "$r/pause" "$src"
    strip "$r/pause"
    pack "$r" "$PAUSE_REF" "$IMAGES/pause.tar" '{"Entrypoint":["/pause"],"User":"65535:65535"}'
    log "pause image: $(du -h "$IMAGES/pause.tar" | cut -f1)"
  else
    # Reported at the end, after the job image (which does not need it) is built.
    MISSING="no $src: run scripts/build-kube.sh (it keeps pause.c from Kubernetes' source tree)"
  fi
fi
finish() { [ -z "${MISSING:-}" ] || { echo "$MISSING" >&2; exit 1; }; exit 0; }

[ "$WANT_JOB" = 1 ] || finish

# The job image's recipe: its text (declare -f: comments left out) is part of the cache key.
build_job_image() {
  # Debian's archive as this machine's apt sources name it (no host name in the repository).
  MIRROR=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    MIRROR="$(awk '/^URIs:/ {u=$2} /^Suites:/ && $0 ~ / '"$SUITE"'( |$)/ {print u; exit}' "$f")"
    [ -n "$MIRROR" ] && break
  done
  if [ -z "$MIRROR" ] && [ -f /etc/apt/sources.list ]; then
    MIRROR="$(awk '$1 == "deb" && $3 == "'"$SUITE"'" {print $2; exit}' /etc/apt/sources.list)"
  fi
  [ -n "$MIRROR" ] || { echo "no apt source for Debian $SUITE found in /etc/apt" >&2; exit 1; }

  R="$WORK/rootfs"
  t=$(date +%s)
  log "debootstrap $SUITE (minbase + python3)"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "$SUITE" "$R" "$MIRROR" \
    >"$WORK/debootstrap.log" 2>&1 || { tail -30 "$WORK/debootstrap.log" >&2; exit 1; }
  rm -rf "$R/var/cache/apt/archives/"*.deb "$R/var/lib/apt/lists/"*
  log "debootstrap done in $(( $(date +%s) - t ))s"

  # pip inside the chroot uses this machine's pip settings (index, wheel dirs, constraints, CA
  # bundle: a TLS-intercepting proxy's CA lives only there) for the build only; they are removed
  # before packing.
  t=$(date +%s)
  cp /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
  cp "$R/etc/ssl/certs/ca-certificates.crt" "$WORK/debian-ca.crt"
  cp /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/ca-certificates.crt"
  build_files=()
  for f in /etc/pip.conf /etc/xdg/pip; do
    [ -e "$f" ] || continue
    mkdir -p "$R$(dirname "$f")"; cp -a "$f" "$R$f"; build_files+=("$f")
  done
  for d in $( (python3 -m pip config list 2>/dev/null | sed -n "s/.*find-links='\(.*\)'/\1/p"; echo "${PIP_FIND_LINKS:-}") | sort -u); do
    [ -d "$d" ] || continue
    mkdir -p "$R$d"; cp -a "$d/." "$R$d/"; build_files+=("$d")
  done
  mount -t proc proc "$R/proc"
  pip_env=(HOME=/root PATH=/opt/venv/bin:/usr/bin:/bin)
  while IFS='=' read -r k v; do pip_env+=("$k=$v"); done < <(env | grep -E '^(PIP_|REQUESTS_CA_BUNDLE=|SSL_CERT_FILE=|https?_proxy=|HTTPS?_PROXY=|no_proxy=|NO_PROXY=)' || true)
  chroot "$R" /usr/bin/env -i "${pip_env[@]}" /usr/bin/python3 -m venv /opt/venv
  mapfile -t extra <<<"$swift_extra"
  chroot "$R" /usr/bin/env -i "${pip_env[@]}" /opt/venv/bin/pip install --quiet --no-cache-dir "$TORCH" \
    >"$WORK/pip.log" 2>&1 || { tail -30 "$WORK/pip.log" >&2; exit 1; }
  chroot "$R" /usr/bin/env -i "${pip_env[@]}" /opt/venv/bin/pip install --quiet --no-cache-dir "${extra[@]}" \
    >>"$WORK/pip.log" 2>&1 || { tail -30 "$WORK/pip.log" >&2; exit 1; }
  chroot "$R" /opt/venv/bin/python -c 'import swift.arguments, torch' \
    || { echo "ms-swift was installed in the job image but cannot be imported" >&2; exit 1; }
  versions="$(chroot "$R" /opt/venv/bin/python -c 'import importlib.metadata as m; print("torch", m.version("torch"), "ms-swift", m.version("ms-swift"))')"
  umount "$R/proc"
  for f in "${build_files[@]}"; do rm -rf "${R:?}$f"; done
  cp "$WORK/debian-ca.crt" "$R/etc/ssl/certs/ca-certificates.crt"
  : > "$R/etc/resolv.conf"
  find "$R/opt/venv" -name __pycache__ -prune -exec rm -rf {} +
  log "venv ($versions) in $(( $(date +%s) - t ))s"

  t=$(date +%s)
  pack "$R" "$JOB_REF" "$JOB_TAR" \
    '{"Env":["PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","HOME=/tmp","USE_HF=1","HF_HUB_OFFLINE=1","HF_DATASETS_OFFLINE=1","TRANSFORMERS_OFFLINE=1"],"Cmd":["swift","--help"],"WorkingDir":"/tmp"}'
  rm -f "$IMAGES"/job-*.tar.tmp
  for old in "$IMAGES"/job-*.tar; do [ "$old" = "$JOB_TAR" ] || rm -f "$old"; done
  echo "$HASH" > "$IMAGES/job.hash"
  echo "$versions" > "$IMAGES/job.versions"
  log "job image $JOB_REF packed in $(( $(date +%s) - t ))s: $(du -h "$JOB_TAR" | cut -f1) ($versions)"
}

# 3. The job image, keyed by its inputs.
swift_extra="$(python3 -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["swift"], sep="\n")')"
constraints=""
for f in /etc/pip.conf /etc/xdg/pip/pip.conf /etc/xdg/pip/constraints.txt; do
  [ -f "$f" ] && constraints+="$(cat "$f")"
done
HASH="$( { declare -f build_job_image pack; echo "$swift_extra"; echo "$TORCH $SUITE"; echo "$constraints"; } | sha256sum | cut -c1-16)"
JOB_TAR="$IMAGES/job-$HASH.tar"
if [ -s "$JOB_TAR" ]; then
  log "job image $JOB_REF up to date ($JOB_TAR)"
  echo "$HASH" > "$IMAGES/job.hash"
  finish
fi

build_job_image
log "total $(( $(date +%s) - T0 ))s"
finish
