#!/usr/bin/env bash
# Build a real Kubernetes v1.20.2 control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler) and a kubelet from Debian's *source* package `kubernetes`, once, and cache the
# binaries outside the repository, with Kubernetes' pause.c (scripts/build-kube-images.sh compiles
# the pod sandbox image from it). The kube test tier (tests/kube, tests/contract[kube]) and
# scripts/kube-cluster use them. Only what the cache lacks is built: a cache with the control plane
# gains the kubelet without rebuilding the rest.
#
#   scripts/build-kube.sh            # no-op when the cache is complete
#   JUPYTER_QUOTA_KUBE_CACHE=/some/dir scripts/build-kube.sh
#
# Cache: ${JUPYTER_QUOTA_KUBE_CACHE:-$HOME/.cache/jupyter-quota/kube-1.20.2}/bin
# Kubernetes 1.20 vendors github.com/modern-go/reflect2 v1.0.1, whose map iteration faults under
# Go >= 1.18 (json-iterator encoding any custom resource: kube-apiserver dies with "fatal error:
# fault" in mapiterinit). Debian's Go is 1.19, so the vendored copy is replaced by reflect2 v1.0.2
# (the fixed release, from Debian's golang-github-modern-go-reflect2-dev) before building; the
# PATCHES marker in the cache records it, so a cache built without the fix is rebuilt.
# Needs: Debian bookworm apt sources (binary ones are enough: the deb-src entries are derived
# from them at run time into a temporary list, never written to /etc/apt), and root or sudo to
# install golang-go, rsync and etcd-server when they are missing. Takes ~13 min on 2 cores for the
# control plane, ~15 for the kubelet alone (code generation included), and ~1.5 GB of scratch
# space (removed afterwards); prints timings.
set -euo pipefail

CACHE="${JUPYTER_QUOTA_KUBE_CACHE:-$HOME/.cache/jupyter-quota/kube-1.20.2}"
BIN="$CACHE/bin"
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
#: What this build changes in Debian's tree (see above); a cache without this line is stale.
PATCHES="reflect2-v1.0.2"
T0=$(date +%s)

log() { printf '[build-kube %4ss] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }

# The components the cache lacks (a cache of another patch level lacks them all).
MISSING=()
for c in "${COMPONENTS[@]}"; do
  if [ ! -x "$BIN/$c" ] || ! grep -qx "$PATCHES" "$BIN/PATCHES" 2>/dev/null; then MISSING+=("$c"); fi
done

complete() {
  local c
  [ "${#MISSING[@]}" = 0 ] || return 1
  [ -f "$BIN/pause.c" ] || return 1
  command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ] || return 1
  grep -qx "$PATCHES" "$BIN/PATCHES" 2>/dev/null || return 1
  return 0
}

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if complete; then
  log "cache complete at $BIN ($("$BIN/kube-apiserver" --version 2>/dev/null || echo '?')); nothing to do"
  exit 0
fi

# 1. Debian packages: Go toolchain, rsync (the code generators need it), etcd.
missing=()
for p in golang-go rsync etcd-server golang-github-modern-go-reflect2-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  $SUDO apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${missing[@]}" >/dev/null \
    || { $SUDO apt-get -o DPkg::Lock::Timeout=300 update >/dev/null &&
         $SUDO apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${missing[@]}" >/dev/null; }
fi
log "go: $(go version)"

# 2. A private apt configuration whose deb-src entries are derived from the machine's own
#    binary sources, so no host name is written anywhere but a temp dir.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/jq-build-kube.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/sources.list.d" "$WORK/lists/partial" "$WORK/cache/archives/partial" "$WORK/src"
: > "$WORK/sources.list"
if [ -f /etc/apt/sources.list ]; then
  sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' /etc/apt/sources.list >> "$WORK/sources.list"
fi
for f in /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" >> "$WORK/sources.list"
done
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  # deb822 stanzas: only the "Types:" line changes.
  sed 's/^Types:.*/Types: deb-src/' "$f" > "$WORK/sources.list.d/$(basename "$f")"
done
APT_OPTS=(
  -o "Dir::Etc::SourceList=$WORK/sources.list"
  -o "Dir::Etc::SourceParts=$WORK/sources.list.d"
  -o "Dir::State::Lists=$WORK/lists"
  -o "Dir::Cache=$WORK/cache"
  -o "Debug::NoLocking=1"
  -o "APT::Sandbox::User=root"
)
log "apt-get update (deb-src, private lists)"
apt-get "${APT_OPTS[@]}" update >/dev/null
log "apt-get source kubernetes"
( cd "$WORK/src" && apt-get "${APT_OPTS[@]}" source --only-source kubernetes >/dev/null 2>"$WORK/source.err" ) \
  || { cat "$WORK/source.err" >&2; exit 1; }
TREE="$(find "$WORK/src" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -1)"
[ -n "$TREE" ] && [ -d "$TREE/cmd/kube-apiserver" ] || { echo "no kubernetes tree in $WORK/src" >&2; exit 1; }
log "source tree: $(basename "$TREE")"

# 3. reflect2 v1.0.2 in place of the vendored v1.0.1 (see the top), its version recorded where
#    `go build -mod=vendor` checks it (go.mod's require and replace, vendor/modules.txt).
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
grep -q '^module github.com/modern-go/reflect2' "$REFLECT2/go.mod" && [ -f "$REFLECT2/go_above_118.go" ] \
  || { echo "$REFLECT2 is not reflect2 v1.0.2" >&2; exit 1; }
rm -rf "$TREE/vendor/github.com/modern-go/reflect2"
rsync -a --exclude='*_test.go' --exclude=test --exclude=tests "$REFLECT2/" "$TREE/vendor/github.com/modern-go/reflect2/"
sed -i 's#github.com/modern-go/reflect2 v1.0.1#github.com/modern-go/reflect2 v1.0.2#g' "$TREE/go.mod" "$TREE/vendor/modules.txt"
grep -q 'github.com/modern-go/reflect2 v1.0.2' "$TREE/vendor/modules.txt" \
  || { echo "vendor/modules.txt does not list reflect2" >&2; exit 1; }
log "vendored reflect2 replaced by v1.0.2"

# 4. Build, offline, from vendor/: only what the cache lacks.
export GOFLAGS=-mod=vendor GO111MODULE=on GOPROXY=off GOTOOLCHAIN=local
export KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean
for c in "${MISSING[@]}"; do
  t=$(date +%s)
  log "make WHAT=cmd/$c"
  ( cd "$TREE" && make WHAT="cmd/$c" >"$WORK/make-$c.log" 2>&1 ) \
    || { tail -40 "$WORK/make-$c.log" >&2; exit 1; }
  log "built $c in $(( $(date +%s) - t ))s"
done

mkdir -p "$BIN"
install -m 0644 "$TREE/build/pause/linux/pause.c" "$BIN/pause.c"
for c in "${MISSING[@]}"; do
  out="$(find "$TREE/_output" -type f -name "$c" -perm -u+x | head -1)"
  [ -n "$out" ] || { echo "binary $c not found under _output" >&2; exit 1; }
  install -m 0755 "$out" "$BIN/$c.tmp" && mv -f "$BIN/$c.tmp" "$BIN/$c"
done
# Components kept from an older cache were built with other patches: they were all rebuilt above.
echo "$PATCHES" > "$BIN/PATCHES"
log "cached in $BIN: $("$BIN/kube-apiserver" --version)"
log "total $(( $(date +%s) - T0 ))s"
