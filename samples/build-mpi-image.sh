#!/usr/bin/env bash
# Builds barge/mpi:local offline: Debian's OpenMPI (openmpi-bin), mpi4py
# (python3-mpi4py) and OpenSSH (openssh-server, openssh-client) cut out of
# this machine's own installation, the way tests/bed/build-torch-image.sh
# cuts the PyTorch image. Installs the packages with apt when they are
# missing, then `docker import`s a rootfs made of the file lists (dpkg -L) of
# those packages and their Depends closure, plus python3, bash, dash (/bin/sh),
# coreutils, sed and grep, the alternatives symlinks no file list contains, and a few
# generated files: /etc/passwd with root and the `sshd` user that sshd's
# privilege separation needs, /etc/group, /tmp, and /etc/ssh/sshd_config
# (Debian's default, which openssh-server's install would write). /run/sshd
# is left out: barge makes it when a worker starts.
#
# The image's PATH starts with /opt/mpi/bin (empty), so that a test can see
# the image's own ENV reach the ranks on the workers.
#
# Idempotent: the image carries a label with a hash of the packages'
# versions and this script; an image with the same label is kept. Prints
# the image ID.
#
# Usage: samples/build-mpi-image.sh [TAG]   (default barge/mpi:local)
#   BARGE_MPI_CHECK=1  also run a 2-rank mpi4py allreduce in a container.
set -euo pipefail

tag=${1:-barge/mpi:local}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
py=/usr/bin/python3   # Debian's python, not whatever is first on PATH

die() { echo "build-mpi-image: $*" >&2; exit 1; }
log() { echo "build-mpi-image: $*" >&2; }

timeout 20 docker version >/dev/null 2>&1 || die "no Docker engine answers (scripts/ensure-docker.sh starts one)"
"$root/scripts/install-deps.sh" openmpi-bin python3-mpi4py openssh-server openssh-client >&2

work=$(mktemp -d "${TMPDIR:-/tmp}/barge-mpi.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Package closure (Depends + Pre-Depends, first installed alternative,
# virtual packages through their installed provider) and its files.
"$py" - "$work" <<'PY'
import os, re, subprocess, sys
work = sys.argv[1]
fmt = '${Package}\t${db:Status-Status}\t${Version}\t${Provides}\t${Depends}\t${Pre-Depends}\n'
out = subprocess.run(['dpkg-query', '-W', '-f', fmt], check=True, capture_output=True, text=True).stdout
pkgs, provides = {}, {}
for line in out.splitlines():
    name, status, version, prov, dep, pre = (line.split('\t') + [''] * 6)[:6]
    if status != 'installed':
        continue
    pkgs[name] = (version, ', '.join(x for x in (dep, pre) if x))
    for p in prov.split(','):
        p = re.sub(r'\s*\(.*\)', '', p).strip()
        if p:
            provides.setdefault(p, []).append(name)

def resolve(alternatives):
    for alt in alternatives.split('|'):
        name = re.sub(r'\s*\(.*?\)|\s*\[.*?\]|\s*<.*?>', '', alt).strip().split(':')[0]
        if name in pkgs:
            return name
        for p in provides.get(name, []):
            return p
    return None

todo = ['openmpi-bin', 'python3-mpi4py', 'openssh-server', 'openssh-client', 'python3', 'bash',
        'dash', 'coreutils', 'sed', 'grep', 'libc-bin', 'hostname']
seen = set()
while todo:
    p = todo.pop()
    if p in seen:
        continue
    if p not in pkgs:
        sys.exit(f'package {p} is not installed')
    seen.add(p)
    for group in filter(None, (g.strip() for g in pkgs[p][1].split(','))):
        r = resolve(group)
        if r is None:
            sys.exit(f'{p}: no installed package satisfies "{group}"')
        todo.append(r)

with open(os.path.join(work, 'packages'), 'w') as f:
    for p in sorted(seen):
        f.write(f'{p} {pkgs[p][0]}\n')
PY

source_id=$(cat "$work/packages" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
mpi_version=$(awk '$1 == "openmpi-bin" {print $2}' "$work/packages")
current=$(docker image inspect --format '{{index .Config.Labels "barge.image.source"}}' "$tag" 2>/dev/null || true)
if [[ "$current" == "$source_id" ]]; then
  log "$tag is up to date (openmpi-bin $mpi_version, $(wc -l <"$work/packages") packages)"
  docker image inspect --format '{{.Id}}' "$tag"
  exit 0
fi
log "openmpi-bin $mpi_version: $(wc -l <"$work/packages") packages"

# Every path of those packages, with directories made canonical (usr-merge:
# /lib/x → usr/lib/x), the last component left as it is (symlinks stay links).
"$py" - "$work" <<'PY'
import os, subprocess, sys
work = sys.argv[1]
names = [l.split()[0] for l in open(os.path.join(work, 'packages'))]
paths = set()
for i in range(0, len(names), 50):
    out = subprocess.run(['dpkg-query', '-L'] + names[i:i + 50], capture_output=True, text=True).stdout
    for p in out.splitlines():
        if p.startswith('/') and p not in ('/', '/.'):
            paths.add(p)

# Alternatives: the generic link (/usr/lib/x86_64-linux-gnu/libblas.so.3 ->
# /etc/alternatives/libblas.so.3-x86_64-linux-gnu -> .../blas/libblas.so.3),
# master and slaves, when the chosen target is one of our files.
sel = subprocess.run(['update-alternatives', '--get-selections'], capture_output=True, text=True).stdout
for line in sel.splitlines():
    name = line.split()[0]
    q = subprocess.run(['update-alternatives', '--query', name], capture_output=True, text=True).stdout
    head = q.split('\n\n')[0].splitlines()   # Name/Link/Slaves/Status/Best/Value
    links = {}
    in_slaves = False
    for l in head:
        if l.startswith('Link: '):
            links[name] = l[6:]
        elif l.startswith('Slaves:'):
            in_slaves = True
        elif in_slaves and l.startswith(' '):
            sname, slink = l.split()[:2]
            links[sname] = slink
        else:
            in_slaves = False
    for n, link in links.items():
        alt = '/etc/alternatives/' + n
        if os.path.lexists(alt) and os.path.realpath(alt) in paths:
            paths.update([link, alt])

def canon(p):
    d, b = os.path.split(p)
    return os.path.join(os.path.realpath(d), b)

out = set()
for p in paths:
    if not os.path.lexists(p):
        continue
    c = canon(p)
    out.add(c)
    # parent directories, so that every member has its directory
    d = os.path.dirname(c)
    while d not in ('/', ''):
        out.add(d)
        d = os.path.dirname(d)
# usr-merged top-level links (/bin -> usr/bin, ...)
for top in ('/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'):
    if os.path.islink(top):
        out.add(top)
with open(os.path.join(work, 'files'), 'wb') as f:
    for p in sorted(out):
        f.write(p.lstrip('/').encode() + b'\0')
PY

# Generated files, on top of the packages' files in the same tarball.
extra="$work/extra"
mkdir -p "$extra"/{etc/ssh,tmp,root,var/tmp,home,proc,sys,dev,workspace,opt/mpi/bin}
chmod 0755 "$extra"
chmod 1777 "$extra/tmp" "$extra/var/tmp"
chmod 0700 "$extra/root"
printf 'root:x:0:0:root:/root:/bin/bash\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$extra/etc/passwd"
cp /usr/share/openssh/sshd_config "$extra/etc/ssh/sshd_config"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$extra/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$extra/etc/nsswitch.conf"
: >"$extra/etc/hosts"
: >"$extra/etc/resolv.conf"

# docker import refuses a path twice: the packages' files win for
# directories, the generated files replace nothing a package ships.
(cd "$extra" && find . -mindepth 1 -printf '%P\n') | sort >"$work/extra.all"
tr '\0' '\n' <"$work/files" | sort >"$work/files.sorted"
comm -23 "$work/extra.all" "$work/files.sorted" | tr '\n' '\0' >"$work/extra.files"

log "importing $(tr -cd '\0' <"$work/files" | wc -c) paths"
tar --numeric-owner -cf - --no-recursion --null \
  -C / -T "$work/files" \
  -C "$extra" --owner=0 --group=0 -T "$work/extra.files" 2>"$work/tar.err" \
  | docker import -m "openmpi-bin $mpi_version, mpi4py and OpenSSH cut from this machine's Debian packages" \
    - "$tag.base" >/dev/null || { cat "$work/tar.err" >&2; die "docker import failed"; }
if [[ -s "$work/tar.err" ]]; then
  log "tar warnings:"
  head -n 5 "$work/tar.err" >&2
fi
# The linker cache for exactly the libraries in the image.
previous=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
cid=$(docker create "$tag.base" /sbin/ldconfig)
docker start -a "$cid" >&2 || { docker rm -f "$cid" >/dev/null; die "ldconfig failed in the image"; }
docker commit \
  -c 'ENV PATH=/opt/mpi/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV LANG=C.UTF-8' \
  -c 'ENV PYTHONDONTWRITEBYTECODE=1' \
  -c 'WORKDIR /workspace' \
  -c 'CMD ["/usr/bin/python3"]' \
  -c "LABEL barge.image.source=$source_id" \
  -c "LABEL barge.openmpi.version=$mpi_version" \
  "$cid" "$tag" >/dev/null
docker rm "$cid" >/dev/null
docker rmi "$tag.base" >/dev/null
# The image the tag named before (an older build): no dangling image left.
if [[ -n "$previous" && "$previous" != "$(docker image inspect --format '{{.Id}}' "$tag")" ]]; then
  docker rmi "$previous" >/dev/null 2>&1 || true  # kept if something else still uses it
fi

if [[ "${BARGE_MPI_CHECK:-0}" == 1 ]]; then
  log "checking a 2-rank mpi4py allreduce"
  docker run --rm -e OMPI_ALLOW_RUN_AS_ROOT=1 -e OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    -e OMPI_MCA_btl_vader_single_copy_mechanism=none "$tag" \
    mpirun --oversubscribe -np 2 /usr/bin/python3 -c '
from mpi4py import MPI
c = MPI.COMM_WORLD
print("rank", c.Get_rank(), "allreduce ->", c.allreduce(c.Get_rank() + 1))
' >&2 || die "the image cannot run an mpi4py allreduce"
fi
docker image inspect --format '{{.Id}}' "$tag"
