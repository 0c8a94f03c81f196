# shellcheck shell=bash disable=SC2154  # $work, die and log are the caller's
# Cutting a Docker image out of this machine's own Debian packages, offline:
# the steps tests/bed/build-torch-image.sh and samples/build-mpi-image.sh
# share. Sourced (bash), not run. The caller defines die and log, makes
# $work (a scratch directory it removes), and calls, in order:
#   image_closure ROOT_PACKAGE...    $work/packages: "name version" of the
#                                    roots and their Depends closure
#   image_source_id SCRIPT           a hash of the packages, SCRIPT and this file
#   image_file_list                  $work/files: every path to copy, NUL-separated
#   (fills $work/extra with its generated files: /etc/passwd, ...)
#   image_import TAG MESSAGE         docker import of files + extra as TAG.base
#   image_commit TAG COMMIT_CHANGE...  ldconfig in TAG.base, committed as TAG
#                                    with the changes (-c ...), TAG.base and
#                                    the image TAG named before removed
# Needs /usr/bin/python3 (Debian's python, not whatever is first on PATH), dpkg-query, update-alternatives, tar, docker.

image_lib=${BASH_SOURCE[0]}

# Package closure (Depends + Pre-Depends, first installed alternative,
# virtual packages through their installed provider) of the roots.
image_closure() {
  /usr/bin/python3 - "$work" "$@" <<'PY'
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

todo = sys.argv[2:]
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
}

# The image's barge.image.source label: it changes with any package
# version, the calling script or this file.
image_source_id() {
  cat "$work/packages" "$1" "$image_lib" | sha256sum | cut -c1-16
}

# Every path of those packages, with directories made canonical (usr-merge:
# /lib/x → usr/lib/x), the last component left as it is (symlinks stay links).
image_file_list() {
  /usr/bin/python3 - "$work" <<'PY'
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
}

# The packages' files and the generated ones in $work/extra, in one
# tarball, imported as TAG.base.
image_import() {
  local tag=$1 message=$2 extra="$work/extra"
  # docker import refuses a path twice: the packages' files win for
  # directories, the generated files replace nothing a package ships.
  (cd "$extra" && find . -mindepth 1 -printf '%P\n') | sort >"$work/extra.all"
  tr '\0' '\n' <"$work/files" | sort >"$work/files.sorted"
  comm -23 "$work/extra.all" "$work/files.sorted" | tr '\n' '\0' >"$work/extra.files"

  log "importing $(tr -cd '\0' <"$work/files" | wc -c) paths"
  tar --numeric-owner -cf - --no-recursion --null \
    -C / -T "$work/files" \
    -C "$extra" --owner=0 --group=0 -T "$work/extra.files" 2>"$work/tar.err" \
    | docker import -m "$message" - "$tag.base" >/dev/null || { cat "$work/tar.err" >&2; die "docker import failed"; }
  if [[ -s "$work/tar.err" ]]; then
    log "tar warnings:"
    head -n 5 "$work/tar.err" >&2
  fi
}

# The linker cache for exactly the libraries in the image, committed as TAG
# with the caller's changes (each one a `docker commit -c` argument).
image_commit() {
  local tag=$1 previous cid change
  shift
  local changes=()
  for change in "$@"; do changes+=(-c "$change"); done
  previous=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
  cid=$(docker create "$tag.base" /sbin/ldconfig)
  docker start -a "$cid" >&2 || { docker rm -f "$cid" >/dev/null; die "ldconfig failed in the image"; }
  docker commit "${changes[@]}" "$cid" "$tag" >/dev/null
  docker rm "$cid" >/dev/null
  docker rmi "$tag.base" >/dev/null
  # The image the tag named before (an older build): no dangling image left.
  if [[ -n "$previous" && "$previous" != "$(docker image inspect --format '{{.Id}}' "$tag")" ]]; then
    docker rmi "$previous" >/dev/null 2>&1 || true  # kept if something else still uses it
  fi
}
