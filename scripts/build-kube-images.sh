#!/usr/bin/env bash
# Build the container images the test node runs, with no registry, as docker-archive tarballs in
# the kube cache (scripts/kube-cluster imports them into containerd):
#
#   busybox.tar   docker.io/library/busybox:1.36   Debian's static busybox (the default test job image)
#   pause.tar     localhost/jupyter-quota-pause:3.4.1   Kubernetes' own pause.c (the pod sandbox)
#   job-<hash>.tar localhost/jupyter-quota-job:latest   Debian bookworm (debootstrap) + Python 3.11 +
#                 torch (CPU) + ms-swift, at the versions scripts/install-swift.sh installs
#   user-<hash>.tar localhost/jupyter-quota-user:latest   the job image plus a second layer: this
#                 checkout's jupyter_quota (a wheel), jupyterhub (singleuser) and jupyterlab at the
#                 hub's versions, and the user jovyan (1000:100); KubeSpawner's single-user image
#
#   scripts/build-kube-images.sh            # builds what is missing; prints timings
#   scripts/build-kube-images.sh --no-job   # only busybox and pause (seconds)
#   scripts/build-kube-images.sh --no-pause # busybox and the job image (before build-kube.sh is done)
#   scripts/build-kube-images.sh --no-user  # all but the user image
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

WANT_JOB=1 WANT_PAUSE=1 WANT_USER=1
[ "${1:-}" = "--no-job" ] && WANT_JOB=0 WANT_USER=0
[ "${1:-}" = "--no-pause" ] && WANT_PAUSE=0
[ "${1:-}" = "--no-user" ] && WANT_USER=0
USER_REF="localhost/jupyter-quota-user:latest"

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
else
  build_job_image
fi
[ "$WANT_USER" = 1 ] || { log "total $(( $(date +%s) - T0 ))s"; finish; }

# The user image: the job image's layer as it is, plus one layer written by pip in an overlay
# mount over it (so only what pip adds is packed, and containerd stores the base layer once).
build_user_image() {
  local L="$WORK/user/lower" U="$WORK/user/upper" O="$WORK/user/work" M="$WORK/user/merged" t w f d
  mkdir -p "$L" "$U" "$O" "$M"
  t=$(date +%s)
  tar -xOf "$JOB_TAR" layer.tar | tar --numeric-owner -xf - -C "$L"
  mount -t overlay overlay -o "lowerdir=$L,upperdir=$U,workdir=$O" "$M"
  # This machine's pip settings, CA bundle and local wheel dirs for the build only: bind mounts,
  # so none of them lands in the layer (their mount points are removed below).
  binds=()
  for f in /etc/resolv.conf /etc/ssl/certs/ca-certificates.crt /etc/pip.conf /etc/xdg/pip /opt/wheels /opt/pypi /opt/pypi-more $(echo "${PIP_FIND_LINKS:-}" | tr ' ' '\n'); do
    [ -e "$f" ] || continue
    if [ -d "$f" ]; then mkdir -p "$M$f"; else mkdir -p "$(dirname "$M$f")"; [ -e "$M$f" ] || : > "$M$f"; fi
    mount --bind -o ro "$f" "$M$f"; binds+=("$f")
  done
  mount -t proc proc "$M/proc"
  pip_env=(HOME=/root PATH=/opt/venv/bin:/usr/bin:/bin)
  while IFS='=' read -r k v; do pip_env+=("$k=$v"); done < <(env | grep -E '^(PIP_|REQUESTS_CA_BUNDLE=|SSL_CERT_FILE=|https?_proxy=|HTTPS?_PROXY=|no_proxy=|NO_PROXY=)' || true)
  mkdir -p "$M/tmp/wheel"; cp "$WHEEL" "$M/tmp/wheel/"
  chroot "$M" /usr/bin/env -i "${pip_env[@]}" /opt/venv/bin/pip install --quiet --no-cache-dir \
    "/tmp/wheel/$(basename "$WHEEL")" "jupyterhub==$HUB_VERSION" "jupyterlab==$LAB_VERSION" \
    >"$WORK/pip-user.log" 2>&1 || { umount -R "$M"; tail -30 "$WORK/pip-user.log" >&2; exit 1; }
  chroot "$M" /opt/venv/bin/python -c 'import jupyter_quota, jupyterhub, jupyterlab' \
    || { umount -R "$M"; echo "the user image's packages cannot be imported" >&2; exit 1; }
  grep -q '^jovyan:' "$M/etc/passwd" || echo 'jovyan:x:1000:100:jovyan:/home/jovyan:/bin/bash' >> "$M/etc/passwd"
  mkdir -p "$M/home/jovyan"; chown 1000:100 "$M/home/jovyan"
  rm -rf "$M/tmp/wheel"
  umount "$M/proc"
  for ((i=${#binds[@]}-1; i>=0; i--)); do umount "$M${binds[i]}"; done
  umount "$M"
  # Mount points made for the binds, when the base had nothing there (the CA bundle and
  # resolv.conf are the base's own files, untouched by the bind).
  for f in "${binds[@]}"; do [ -e "$L$f" ] || rm -rf "${U:?}$f"; done
  for d in /opt /etc/xdg; do [ -e "$L$d" ] || rmdir "$U$d" 2>/dev/null || true; done
  find "$U" -name __pycache__ -prune -exec rm -rf {} +
  # overlayfs whiteouts (0/0 character devices, opaque directories) as the image format's .wh. files
  find "$U" -type c | while read -r f; do rm -f "$f"; : > "$(dirname "$f")/.wh.$(basename "$f")"; done
  python3 -c 'import os,sys
for d, _, _ in os.walk(sys.argv[1]):
    try: opaque = os.getxattr(d, "trusted.overlay.opaque") == b"y"
    except OSError: opaque = False
    if opaque: open(os.path.join(d, ".wh..wh..opq"), "w").close()' "$U"
  log "user layer (jupyterhub $HUB_VERSION, jupyterlab $LAB_VERSION, $(basename "$WHEEL")) in $(( $(date +%s) - t ))s: $(du -sh "$U" | cut -f1)"

  t=$(date +%s)
  w="$WORK/user/pack"; mkdir -p "$w"
  tar -xf "$JOB_TAR" -C "$w" layer.tar config.json
  mv "$w/layer.tar" "$w/base.tar"
  tar --numeric-owner -C "$U" -cf "$w/user.tar" .  # no xattrs: overlayfs keeps its own there
  base_id="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rootfs"]["diff_ids"][0])' "$w/config.json")"
  user_id="sha256:$(sha256sum "$w/user.tar" | cut -d' ' -f1)"
  printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","HOME=/home/jovyan","SHELL=/bin/bash"],"User":"1000:100","WorkingDir":"/home/jovyan","Cmd":["jupyterhub-singleuser"]},"rootfs":{"type":"layers","diff_ids":["%s","%s"]}}' \
    "$base_id" "$user_id" > "$w/config.json"
  printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["base.tar","user.tar"]}]' "$USER_REF" > "$w/manifest.json"
  tar -C "$w" -cf "$USER_TAR.tmp" manifest.json config.json base.tar user.tar
  mv -f "$USER_TAR.tmp" "$USER_TAR"
  for old in "$IMAGES"/user-*.tar; do [ "$old" = "$USER_TAR" ] || rm -f "$old"; done
  echo "$USER_HASH" > "$IMAGES/user.hash"
  log "user image $USER_REF packed in $(( $(date +%s) - t ))s: $(du -h "$USER_TAR" | cut -f1)"
}

# 4. The user image, keyed by the job image, its recipe, this checkout's wheel and the hub's versions.
PY="${JUPYTER_QUOTA_VENV:-.venv}/bin/python"
[ -x "$PY" ] || PY=python3
mkdir -p "$WORK/wheel"
"$PY" -m pip wheel --quiet --no-deps -w "$WORK/wheel" . >"$WORK/wheel.log" 2>&1 \
  || { tail -30 "$WORK/wheel.log" >&2; echo "could not build this checkout's wheel (scripts/setup builds the labextension it needs)" >&2; exit 1; }
WHEEL="$(ls "$WORK"/wheel/jupyter_quota-*.whl)"
HUB_VERSION="$("$PY" -c 'import importlib.metadata as m; print(m.version("jupyterhub"))')"
LAB_VERSION="$("$PY" -c 'import importlib.metadata as m; print(m.version("jupyterlab"))')"
# What the wheel installs: its files and entry points (not its zip's times, nor its metadata,
# which carries the README as the long description).
wheel_sum="$(python3 -c 'import hashlib,sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); print(hashlib.sha256(b"".join(n.encode()+z.read(n) for n in sorted(z.namelist()) if ".dist-info/" not in n or n.endswith("/entry_points.txt"))).hexdigest())' "$WHEEL")"
USER_HASH="$( { echo "$HASH"; declare -f build_user_image; echo "$wheel_sum $HUB_VERSION $LAB_VERSION"; } | sha256sum | cut -c1-16)"
USER_TAR="$IMAGES/user-$USER_HASH.tar"
if [ -s "$USER_TAR" ]; then
  log "user image $USER_REF up to date ($USER_TAR)"
  echo "$USER_HASH" > "$IMAGES/user.hash"
else
  build_user_image
fi
log "total $(( $(date +%s) - T0 ))s"
finish
