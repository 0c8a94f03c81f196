#!/usr/bin/env python3
"""bench/emu/fake-engine.py: an EMULATED Docker Engine API for the emulated
hosts (bench/emu/emu.sh up N --api). It is not Docker and runs no container.

ONE process (asyncio, standard library only) serves an HTTP/1.1 Engine API
on one unix socket per emulated host, $BARGE_EMU_DIR/hosts-api/ADDR/docker.sock:
the host's sshd opens it for barge's direct-streamlocal channels, and the
host's commands see it as DOCKER_HOST (bench/emu/enter.cc). It answers what
barge asks of a plain `docker` host through the API: /_ping, /version,
/info, image inspect and import, container create, start, attach (hijacked,
multiplexed frames unless Tty), wait, inspect, logs, stop, kill, rename,
delete and the listing with label, name and id filters; every answer
carries a Date header (barge reads the host's clock from it).

State: the SAME on-disk layout as bench/emu/fake-docker, in the host's /tmp
($BARGE_EMU_DIR/hosts/ADDR/fake-docker/NAME/: id, labels, started,
finished, exit, log, lock, pid, cmd; plus config.json, the create body's
Image, Cmd, Tty, AutoRemove, NetworkMode), so a CLI call on that host (`docker` there is
fake-docker: barge's queue tickets, its watchdog, a `docker create` for
run_options) sees and changes the same containers.
Names are taken atomically (mkdir), renames and removals hold the host's
names lock as fake-docker does. A started container's lifetime follows its
command, as fake-docker's:
  sleep N          a `sleep N` process holding the container's lock (so a
                   CLI `stop`/`rm -f` ends it as it ends its own)
  emu-barrier N    lives until N containers of its job (barge.job label)
                   have started on all emulated hosts ($BARGE_EMU_DIR/started/JOB/,
                   polled here every 0.1 s; a `sleep` process holds the
                   lock meanwhile), then writes $BARGE_EMU_DIR/ended/JOB
  anything else    exits 0 at once (no process)
Every start records its time in $BARGE_EMU_DIR/started/JOB/HOST-NAME as
fake-docker's `run -d` does, and every request one line "api:WHAT" in the
host's fake-docker.calls (bench/scale.sh counts engine calls per host).
A stop ends the container with exit code 143 (137 after its grace, or by
kill/delete), as fake-docker's.

  fake-engine.py EMU_DIR     # serves every address in EMU_DIR/addrs; writes
                             # EMU_DIR/engine.ready (its pid) once all listen
  FAKE_ENGINE_TRACE=1        # every request and error answer on stderr
"""
import asyncio
import calendar
import email.utils
import errno
import fcntl
import json
import os
import re
import resource
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import time
import urllib.parse

API_VERSION = "1.41"
IMAGE_ID = "sha256:" + "0" * 60 + "0e30"
ZERO_TIME = "0001-01-01T00:00:00Z"
NAME_RE = re.compile(r"^/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
REASONS = {101: "UPGRADED", 200: "OK", 201: "Created", 204: "No Content", 304: "Not Modified",
           400: "Bad Request", 404: "Not Found", 409: "Conflict", 500: "Internal Server Error"}
EMU = ""
# FAKE_ENGINE_TRACE=1: every request and every error answer on stderr
# ($BARGE_EMU_DIR/engine.log under emu.sh).
TRACE = os.environ.get("FAKE_ENGINE_TRACE", "") not in ("", "0")


def stamp(ns=None):
    """RFC 3339 with nanoseconds, as fake-docker's `date -u +%Y-%m-%dT%H:%M:%S.%NZ`."""
    ns = time.time_ns() if ns is None else ns
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + ".%09dZ" % (ns % 10**9)


def stamp_ns(text):
    """ns since the epoch of a stamp() string; None when it is not one."""
    m = re.match(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z$", text)
    if not m:
        return None
    secs = calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))
    return secs * 10**9 + int((m.group(7) or "0").ljust(9, "0"))


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def write(path, text):
    try:
        with open(path, "w") as f:
            f.write(text)
        return True
    except OSError:
        return False


class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Running:
    """A container this server started and that has not ended yet."""

    def __init__(self, name, pid, proc):
        self.name = name  # at start; a rename is followed by id (Host.dir_of)
        self.pid = pid
        self.proc = proc
        self.pidfd = None
        self.ended = asyncio.get_running_loop().create_future()  # the exit code
        self.barrier = None  # the barrier's poll task


class Host:
    """One emulated host's engine: its containers on disk, those running here."""

    def __init__(self, addr):
        self.addr = addr
        self.root = os.path.join(EMU, "hosts", addr, "fake-docker")
        self.calls = self.root + ".calls"
        self.running = {}  # id -> Running
        self.attached = {}  # id -> [Attachment]
        self.exit_waiters = {}  # id -> [Future]: waits for the next exit

    def count(self, what):
        """One line per request in fake-docker.calls (bench/scale.sh's tally)."""
        try:
            fd = os.open(self.calls, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, b"api:" + what.encode() + b"\n")
            finally:
                os.close(fd)
        except OSError:
            pass

    def path(self, name, *rest):
        return os.path.join(self.root, name, *rest)

    def names(self):
        try:
            return [n for n in os.listdir(self.root) if os.path.isdir(self.path(n))]
        except OSError:
            return []

    def resolve(self, ref):
        """The name of the container `ref` (a name, "/name", an ID or a
        unique ID prefix); raises 404."""
        ref = ref.lstrip("/")
        if ref and os.path.isfile(self.path(ref, "id")):
            return ref
        hits = []
        for n in self.names():
            cid = (read(self.path(n, "id")) or "").strip()
            if cid and cid.startswith(ref) and ref:
                if cid == ref:
                    return n
                hits.append(n)
        if len(hits) == 1:
            return hits[0]
        raise HttpError(404, "No such container: " + ref)

    def id_of(self, name):
        return (read(self.path(name, "id")) or "").strip()

    def dir_of(self, cid, hint):
        """The container directory holding ID `cid` (renamed or not); None when gone."""
        if hint and self.id_of(hint) == cid:
            return self.path(hint)
        for n in self.names():
            if self.id_of(n) == cid:
                return self.path(n)
        return None

    def alive(self, name):
        """Running, as fake-docker decides: its lock is held."""
        cid = self.id_of(name)
        if cid in self.running:
            return True
        lock = self.path(name, "lock")
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except OSError:
            return True
        finally:
            os.close(fd)

    def state(self, name):
        """created (never started), running or exited."""
        if self.alive(name):
            return "running"
        if not os.path.exists(self.path(name, "lock")):
            return "created"
        return "exited"

    def labels(self, name):
        out = {}
        for line in (read(self.path(name, "labels")) or "").splitlines():
            k, _, v = line.partition("=")
            if k:
                out[k] = v
        return out

    def config(self, name):
        """Image, Cmd and Tty: the create body's, or, for a container the
        CLI created (fake-docker create), its command from `cmd`."""
        text = read(self.path(name, "config.json"))
        if text is None:
            cmd = read(self.path(name, "cmd"))
            return {"Cmd": cmd.splitlines()} if cmd else {}
        try:
            return json.loads(text)
        except ValueError:
            return {}

    def exit_code(self, name):
        try:
            return int((read(self.path(name, "exit")) or "0").strip() or 0)
        except ValueError:
            return 0

    async def names_lock(self):
        """The host's names lock (fake-docker's $R.names.lock): an open fd."""
        os.makedirs(self.root, exist_ok=True)
        fd = os.open(self.root + ".names.lock", os.O_WRONLY | os.O_CREAT, 0o644)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                await asyncio.sleep(0.01)

    async def until_ended(self, name, cid):
        """Returns once the container has ended (or is gone): its exit code."""
        r = self.running.get(cid)
        if r is not None:
            return await asyncio.shield(r.ended)
        while os.path.isdir(self.path(name)) and self.alive(name):
            await asyncio.sleep(0.05)
        return self.exit_code(name)

    async def next_exit(self, name, cid):
        """The exit code of the container's next end: this run's, or, when it
        is not running, that of the run a later start begins."""
        if self.alive(name):
            return await self.until_ended(name, cid)
        fut = asyncio.get_running_loop().create_future()
        self.exit_waiters.setdefault(cid, []).append(fut)
        try:
            return await fut
        finally:
            waiters = self.exit_waiters.get(cid, [])
            if fut in waiters:
                waiters.remove(fut)

    # --- The lifecycle.

    def start(self, name):
        cid = self.id_of(name)
        cfg = self.config(name)
        cmd = [str(a) for a in (cfg.get("Cmd") or [])]
        labels = self.labels(name)
        job = labels.get("barge.job", "")
        ns = time.time_ns()
        t = stamp(ns)
        for f in ("exit", "finished"):
            try:
                os.unlink(self.path(name, f))
            except OSError:
                pass
        write(self.path(name, "started"), t + "\n")
        lines = ["emulated container %s started" % name, "args: %s" % " ".join(cmd)]
        write(self.path(name, "log"), "".join("%s %s\n" % (t, l) for l in lines))
        lock = os.open(self.path(name, "lock"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            seconds = None
            if cmd[:1] == ["sleep"]:
                seconds = cmd[1] if len(cmd) > 1 else "0"
            elif cmd[:1] == ["emu-barrier"]:
                seconds = "1000000000"  # until the barrier ends it
            proc = None
            if seconds is not None:
                env = {"PATH": "/usr/bin:/bin", "BARGE_EMU_DIR": EMU, "BARGE_EMU_SIDE": EMU,
                       "BARGE_EMU_HOST": self.addr}
                proc = subprocess.Popen(["sleep", seconds], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        pass_fds=(lock,), env=env, start_new_session=True)
                write(self.path(name, "pid"), "%d\n" % proc.pid)
        finally:
            os.close(lock)  # the process holds it from here on
        run = Running(name, proc.pid if proc else 0, proc)
        self.running[cid] = run
        for a in self.attached.get(cid, []):
            a.send(lines)
        if job and EMU:
            d = os.path.join(EMU, "started", job)
            os.makedirs(d, exist_ok=True)
            write(os.path.join(d, "%s-%s" % (self.addr, name)),
                  "%d.%09d %s %s\n" % (ns // 10**9, ns % 10**9, self.addr, name))
        loop = asyncio.get_running_loop()
        if proc is None:
            loop.call_soon(self.ended, cid, 0)
            return
        run.pidfd = os.pidfd_open(proc.pid)
        loop.add_reader(run.pidfd, self.reaped, cid)
        if cmd[:1] == ["emu-barrier"]:
            want = int(cmd[1]) if len(cmd) > 1 and cmd[1].isdigit() else 1
            run.barrier = asyncio.ensure_future(self.barrier(cid, job, want))

    async def barrier(self, cid, job, want):
        """Ends container `cid` (exit 0) once `want` containers of `job` started."""
        d = os.path.join(EMU, "started", job)
        while True:
            try:
                if len(os.listdir(d)) >= want:
                    break
            except OSError:
                pass
            await asyncio.sleep(0.1)
        ended = os.path.join(EMU, "ended")
        os.makedirs(ended, exist_ok=True)
        ns = time.time_ns()
        write(os.path.join(ended, job), "%d.%09d\n" % (ns // 10**9, ns % 10**9))
        r = self.running.get(cid)
        if r is not None:
            self.signal(cid, signal.SIGTERM, 0)

    def signal(self, cid, sig, code):
        """Ends running container `cid` with `sig`, its exit code `code`
        unless one was written (a CLI stop writes its own first)."""
        r = self.running.get(cid)
        if r is None:
            return
        d = self.dir_of(cid, r.name)
        if d and not os.path.exists(os.path.join(d, "exit")):
            write(os.path.join(d, "exit"), "%d\n" % code)
        if r.proc is not None:
            try:
                os.kill(r.pid, sig)
            except OSError:
                pass

    def reaped(self, cid):
        r = self.running.get(cid)
        if r is None:
            return
        loop = asyncio.get_running_loop()
        loop.remove_reader(r.pidfd)
        os.close(r.pidfd)
        rc = r.proc.wait()
        self.ended(cid, 128 - rc if rc < 0 else rc)

    def ended(self, cid, code):
        """The container's process ended with `code`: its state on disk, its
        waiters and attached streams."""
        r = self.running.pop(cid, None)
        if r is None:
            return
        if r.barrier is not None:
            r.barrier.cancel()
        d = self.dir_of(cid, r.name)
        if d:
            if os.path.exists(os.path.join(d, "exit")):
                try:
                    code = int((read(os.path.join(d, "exit")) or "0").strip() or 0)
                except ValueError:
                    pass
            elif code != 0:
                write(os.path.join(d, "exit"), "%d\n" % code)
            if not os.path.exists(os.path.join(d, "finished")):
                write(os.path.join(d, "finished"), stamp() + "\n")
        if not r.ended.done():
            r.ended.set_result(code)
        for fut in self.exit_waiters.pop(cid, []):
            if not fut.done():
                fut.set_result(code)
        self.detach(cid)
        if d and self.config(os.path.basename(d)).get("AutoRemove"):
            shutil.rmtree(d, ignore_errors=True)

    def detach(self, cid):
        for a in self.attached.pop(cid, []):
            a.close()

    def shutdown(self):
        for r in list(self.running.values()):
            if r.proc is not None:
                try:
                    os.kill(r.pid, signal.SIGKILL)
                except OSError:
                    pass


class Attachment:
    """One attach stream: what the container writes, framed unless tty."""

    def __init__(self, writer, tty, stdout):
        self.writer = writer
        self.tty = tty
        self.stdout = stdout
        self.done = asyncio.get_running_loop().create_future()

    def send(self, lines):
        if not self.stdout or self.writer.is_closing():
            return
        data = "".join(l + "\n" for l in lines).encode()
        self.writer.write(data if self.tty else frame(1, data))

    def close(self):
        if not self.done.done():
            self.done.set_result(None)


def frame(stream, payload):
    return struct.pack(">BxxxI", stream, len(payload)) + payload


# --- HTTP.

def head(status, headers):
    lines = ["HTTP/1.1 %d %s" % (status, REASONS.get(status, "Status"))]
    base = [("Api-Version", API_VERSION), ("Docker-Experimental", "false"), ("Ostype", "linux"),
            ("Server", "Docker/0.0.0-emulated (linux)"), ("Date", email.utils.formatdate(usegmt=True))]
    for k, v in base + list(headers):
        lines.append("%s: %s" % (k, v))
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(writer, status, body=b"", ctype="application/json"):
    if isinstance(body, (dict, list)):
        body = (json.dumps(body) + "\n").encode()
    elif isinstance(body, str):
        body = body.encode()
    hs = [("Connection", "close")]
    if status not in (204, 304):
        hs = [("Content-Type", ctype), ("Content-Length", str(len(body)))] + hs
    else:
        body = b""
    writer.write(head(status, hs) + body)


async def read_request(reader):
    """(method, path segments, query dict, headers, body); None at EOF."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HttpError(400, "malformed request line")
    method, target, _ = parts
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    elif headers.get("content-length"):
        body = await reader.readexactly(int(headers["content-length"]))
    url = urllib.parse.urlsplit(target)
    segs = [urllib.parse.unquote(s) for s in url.path.split("/")[1:]]
    if segs and re.match(r"^v\d+\.\d+$", segs[0]):
        segs = segs[1:]
    query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
    return method, segs, query, headers, body


async def until_eof(reader):
    """Reads (and drops) what the client sends until it closes."""
    try:
        while await reader.read(65536):
            pass
    except (ConnectionError, OSError):
        pass


async def unless_gone(reader, aw):
    """Awaits `aw` unless the client closes first: True when `aw` finished."""
    main = asyncio.ensure_future(aw)
    eof = asyncio.ensure_future(until_eof(reader))
    done, _ = await asyncio.wait({main, eof}, return_when=asyncio.FIRST_COMPLETED)
    if main in done:
        eof.cancel()
        return True
    main.cancel()
    return False


def truthy(query, key):
    return query.get(key, "") in ("1", "true", "True")


class Engine:
    def __init__(self, addrs):
        self.hosts = {a: Host(a) for a in addrs}

    async def serve(self, host, reader, writer):
        try:
            try:
                req = None
                req = await read_request(reader)
                if req is None:
                    return
                if TRACE:
                    print("fake-engine: %s: %s /%s %s" % (host.addr, req[0], "/".join(req[1]), req[2]),
                          file=sys.stderr, flush=True)
                await self.route(host, reader, writer, *req)
            except HttpError as e:
                answer(writer, e.status, {"message": str(e)})
                if TRACE and req:
                    print("fake-engine: %s: %s /%s: %d %s" % (host.addr, req[0], "/".join(req[1]), e.status, e),
                          file=sys.stderr, flush=True)
            await writer.drain()
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except Exception as e:  # a bug here: say it, answer 500
            print("fake-engine: %s: %r" % (host.addr, e), file=sys.stderr, flush=True)
            try:
                answer(writer, 500, {"message": "fake-engine: %r" % e})
            except Exception:
                pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def route(self, h, reader, writer, method, segs, query, headers, body):
        n = len(segs)
        if segs == ["_ping"] and method in ("GET", "HEAD"):
            h.count("ping")
            if method == "HEAD":
                return writer.write(head(200, [("Content-Type", "text/plain; charset=utf-8"),
                                               ("Content-Length", "2"), ("Connection", "close")]))
            return answer(writer, 200, "OK", "text/plain; charset=utf-8")
        if segs == ["version"] and method == "GET":
            h.count("version")
            return answer(writer, 200, {"Version": "0.0.0-emulated", "ApiVersion": API_VERSION,
                                        "MinAPIVersion": "1.12", "Os": "linux", "Arch": "amd64",
                                        "KernelVersion": os.uname().release, "GitCommit": "emulated"})
        if segs == ["info"] and method == "GET":
            h.count("info")
            return answer(writer, 200, {"ID": "emulated-" + h.addr, "Name": h.addr,
                                        "DockerRootDir": "/", "Driver": "emulated",
                                        "OperatingSystem": "emulated", "NCPU": os.cpu_count()})
        if n >= 2 and segs[0] == "images":
            if segs == ["images", "create"] and method == "POST":
                h.count("image-create")
                return answer(writer, 200, {"status": IMAGE_ID})
            if n >= 3 and segs[-1] == "json" and method == "GET":
                h.count("image-inspect")
                name = "/".join(segs[1:-1])
                return answer(writer, 200, {"Id": IMAGE_ID, "RepoTags": [name], "Os": "linux",
                                            "Architecture": "amd64", "Size": 0,
                                            "GraphDriver": {"Name": "emulated", "Data": {}}})
        if n >= 2 and segs[0] == "containers":
            if segs == ["containers", "json"] and method == "GET":
                h.count("ps")
                return answer(writer, 200, self.list(h, query))
            if segs == ["containers", "create"] and method == "POST":
                h.count("create")
                return answer(writer, 201, self.create(h, query.get("name", ""), body))
            if n == 2 and method == "DELETE":
                h.count("rm")
                await self.remove(h, segs[1], truthy(query, "force"))
                return answer(writer, 204)
            if n == 3:
                return await self.container(h, reader, writer, method, segs[1], segs[2], query)
        raise HttpError(404, "page not found (emulated engine): %s /%s" % (method, "/".join(segs)))

    async def container(self, h, reader, writer, method, ref, verb, query):
        if verb == "json" and method == "GET":
            h.count("inspect")
            return answer(writer, 200, self.inspect(h, h.resolve(ref)))
        if method != "POST" and verb != "logs":
            raise HttpError(404, "page not found (emulated engine)")
        if verb == "logs" and method == "GET":
            h.count("logs")
            return await self.logs(h, reader, writer, h.resolve(ref), query)
        h.count(verb)
        if verb == "start":
            name = h.resolve(ref)
            if h.alive(name):
                return answer(writer, 304)
            h.start(name)
            return answer(writer, 204)
        if verb == "attach":
            return await self.attach(h, reader, writer, h.resolve(ref), query)
        if verb == "wait":
            name = h.resolve(ref)
            cid = h.id_of(name)
            code = h.exit_code(name)
            cond = query.get("condition") or "not-running"
            # The head at once, the body at the end, as an engine does: its
            # head tells a client the wait is in place (docker run starts the
            # container only then). The body runs until close.
            writer.write(head(200, [("Content-Type", "application/json"), ("Connection", "close")]))
            await writer.drain()
            if cond == "next-exit" or (cond == "not-running" and h.alive(name)):
                # (a client that goes away cancels it, as Go's net/http does)
                waited = asyncio.ensure_future(h.next_exit(name, cid))
                if not await unless_gone(reader, waited):
                    return
                code = waited.result()
            elif cond == "removed":
                while os.path.isdir(h.path(name)):
                    code = h.exit_code(name)
                    await asyncio.sleep(0.1)
            return writer.write((json.dumps({"StatusCode": code, "Error": None}) + "\n").encode())
        if verb == "stop":
            name = h.resolve(ref)
            if not h.alive(name):
                return answer(writer, 304)
            t = int(query.get("t", "10") or 10)
            await self.end(h, name, signal.SIGTERM, 143, grace=t)
            return answer(writer, 204)
        if verb == "kill":
            name = h.resolve(ref)
            if not h.alive(name):
                raise HttpError(409, "Container %s is not running" % h.id_of(name))
            sig = query.get("signal", "KILL").upper().removeprefix("SIG")
            num = int(sig) if sig.isdigit() else getattr(signal, "SIG" + sig, signal.SIGKILL)
            await self.end(h, name, num, 128 + int(num), grace=None)
            return answer(writer, 204)
        if verb == "rename":
            await self.rename(h, ref, query.get("name", ""))
            return answer(writer, 204)
        raise HttpError(404, "page not found (emulated engine)")

    async def end(self, h, name, sig, code, grace):
        """Ends running container `name` with `sig` (exit `code`); with a
        grace, waits that long, then kills it (137), and returns once it
        has ended."""
        cid = h.id_of(name)
        if cid in h.running:
            h.signal(cid, sig, code)
        else:  # started by the CLI: fake-docker's own way
            if not os.path.exists(h.path(name, "exit")):
                write(h.path(name, "exit"), "%d\n" % code)
            try:
                os.kill(int((read(h.path(name, "pid")) or "0").strip()), sig)
            except (OSError, ValueError):
                pass
        if grace is None:
            return
        try:
            await asyncio.wait_for(h.until_ended(name, cid), timeout=max(grace, 0) + 0.05)
        except asyncio.TimeoutError:
            write(h.path(name, "exit"), "137\n")
            h.signal(cid, signal.SIGKILL, 137)
            await h.until_ended(name, cid)

    def create(self, h, name, body):
        try:
            spec = json.loads(body or b"{}")
        except ValueError:
            raise HttpError(400, "the create body is not JSON")
        if not isinstance(spec, dict):
            raise HttpError(400, "the create body is not a JSON object")
        if not name:
            name = "emu_" + secrets.token_hex(6)
        if not NAME_RE.match(name):
            raise HttpError(400, "Invalid container name (%s), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed" % name)
        name = name.lstrip("/")
        os.makedirs(h.root, exist_ok=True)
        try:
            os.mkdir(h.path(name))
        except FileExistsError:
            raise HttpError(409, 'Conflict. The container name "/%s" is already in use by container "%s". '
                                 'You have to remove (or rename) that container to be able to reuse that name.'
                            % (name, h.id_of(name)))
        cid = "e0" + secrets.token_hex(31)
        labels = spec.get("Labels") or {}
        write(h.path(name, "id"), cid + "\n")
        write(h.path(name, "started"), ZERO_TIME + "\n")
        write(h.path(name, "created"), stamp() + "\n")
        host_config = spec.get("HostConfig") or {}
        write(h.path(name, "config.json"), json.dumps({"Image": spec.get("Image", ""), "Cmd": spec.get("Cmd"),
                                                       "Tty": bool(spec.get("Tty")),
                                                       "AutoRemove": bool(host_config.get("AutoRemove")),
                                                       "NetworkMode": host_config.get("NetworkMode") or "default"}))
        write(h.path(name, "labels"), "".join("%s=%s\n" % (k, v) for k, v in labels.items()))
        return {"Id": cid, "Warnings": []}

    def inspect(self, h, name):
        cid = h.id_of(name)
        started = (read(h.path(name, "started")) or "").strip()
        if not cid or not started:
            raise HttpError(404, "No such container: " + name)
        st = h.state(name)
        fin, code, pid = ZERO_TIME, 0, 0
        if st == "running":
            try:
                pid = int((read(h.path(name, "pid")) or "0").strip())
            except ValueError:
                pid = 0
        elif st == "exited":
            code = h.exit_code(name)
            if not os.path.exists(h.path(name, "finished")):
                write(h.path(name, "finished"), stamp() + "\n")
            fin = (read(h.path(name, "finished")) or "").strip() or started
        cfg = h.config(name)
        return {"Id": cid, "Name": "/" + name, "Image": IMAGE_ID,
                "Created": (read(h.path(name, "created")) or started).strip(),
                "Path": (cfg.get("Cmd") or [""])[0], "Args": (cfg.get("Cmd") or [])[1:],
                "State": {"Status": st, "Running": st == "running", "Paused": False, "Restarting": False,
                          "OOMKilled": False, "Dead": False, "Pid": pid, "ExitCode": code, "Error": "",
                          "StartedAt": started, "FinishedAt": fin},
                "RestartCount": 0,
                "Config": {"Image": cfg.get("Image", ""), "Cmd": cfg.get("Cmd"), "Tty": cfg.get("Tty", False),
                           "AttachStdin": False, "AttachStdout": True, "AttachStderr": True, "OpenStdin": False,
                           "Labels": h.labels(name)},
                "HostConfig": {"NetworkMode": cfg.get("NetworkMode", "default"),
                               "AutoRemove": cfg.get("AutoRemove", False),
                               "RestartPolicy": {"Name": "no", "MaximumRetryCount": 0}}}

    def list(self, h, query):
        try:
            filters = json.loads(query.get("filters") or "{}")
        except ValueError:
            raise HttpError(400, "invalid filters")

        def values(key):  # the list form and the old {"v": true} form
            v = filters.get(key) or []
            return list(v.keys()) if isinstance(v, dict) else list(v)

        label_f, name_f, id_f, status_f = values("label"), values("name"), values("id"), values("status")
        try:
            name_res = [re.compile(r) for r in name_f]
        except re.error:
            raise HttpError(400, "invalid name filter")
        out = []
        for name in sorted(h.names()):
            if not os.path.isfile(h.path(name, "labels")):
                continue
            cid = h.id_of(name)
            labels = h.labels(name)
            st = h.state(name)
            if not truthy(query, "all") and st != "running":
                continue
            if name_res and not any(r.search("/" + name) or r.search(name) for r in name_res):
                continue
            if id_f and not any(cid.startswith(i) for i in id_f):
                continue
            if status_f and st not in status_f:
                continue
            ok = True
            for f in label_f:
                k, eq, v = f.partition("=")
                if k not in labels or (eq and labels[k] != v):
                    ok = False
            if not ok:
                continue
            cfg = h.config(name)
            out.append({"Id": cid, "Names": ["/" + name], "Image": cfg.get("Image", ""), "ImageID": IMAGE_ID,
                        "Command": " ".join(cfg.get("Cmd") or []), "Created": 0, "State": st,
                        "Status": {"running": "Up", "created": "Created"}.get(st, "Exited (%d)" % h.exit_code(name)),
                        "Labels": labels})
        return out

    async def remove(self, h, ref, force):
        lock = await h.names_lock()
        try:
            name = h.resolve(ref)
            cid = h.id_of(name)
            if h.alive(name):
                if not force:
                    raise HttpError(409, "You cannot remove a running container %s. Stop the container before "
                                         "attempting removal or force remove" % cid)
                await self.end(h, name, signal.SIGKILL, 137, grace=0)
            shutil.rmtree(h.path(name), ignore_errors=True)
            h.detach(cid)
            for fut in h.exit_waiters.pop(cid, []):
                if not fut.done():
                    fut.set_result(h.exit_code(name))
        finally:
            os.close(lock)

    async def rename(self, h, ref, new):
        if not new or not NAME_RE.match(new):
            raise HttpError(400, "Invalid container name (%s)" % new)
        new = new.lstrip("/")
        lock = await h.names_lock()
        try:
            old = h.resolve(ref)
            if old == new:
                raise HttpError(409, "Renaming a container with the same name as its current name")
            try:
                os.mkdir(h.path(new))
            except FileExistsError:
                raise HttpError(409, 'Conflict. The container name "/%s" is already in use by container "%s". '
                                     'You have to remove (or rename) that container to be able to reuse that name.'
                                % (new, h.id_of(new)))
            os.rmdir(h.path(new))
            os.rename(h.path(old), h.path(new))
            cid = h.id_of(new)
            if cid in h.running:
                h.running[cid].name = new
        finally:
            os.close(lock)

    async def attach(self, h, reader, writer, name, query):
        cid = h.id_of(name)
        tty = bool(h.config(name).get("Tty"))
        ctype = "application/vnd.docker.raw-stream" if tty else "application/vnd.docker.multiplexed-stream"
        # Docker answers 101 where the client asked to upgrade, else 200 and the raw stream.
        writer.write(head(101, [("Content-Type", ctype), ("Connection", "Upgrade"), ("Upgrade", "tcp")]))
        if truthy(query, "logs"):
            for line in (read(h.path(name, "log")) or "").splitlines():
                Attachment(writer, tty, truthy(query, "stdout")).send([line.partition(" ")[2]])
        if not truthy(query, "stream") or h.state(name) == "exited":
            return
        a = Attachment(writer, tty, truthy(query, "stdout"))
        h.attached.setdefault(cid, []).append(a)
        # The client's input is the container's stdin: dropped. Its end (the
        # docker CLI half-closes without -i) ends nothing, as on an engine: the
        # stream lasts as long as the container's stdio.
        stdin = asyncio.ensure_future(until_eof(reader))
        try:
            await a.done
        finally:
            stdin.cancel()
            if a in h.attached.get(cid, []):
                h.attached[cid].remove(a)

    async def logs(self, h, reader, writer, name, query):
        tty = bool(h.config(name).get("Tty"))
        ctype = "application/vnd.docker.raw-stream" if tty else "application/vnd.docker.multiplexed-stream"
        writer.write(head(200, [("Content-Type", ctype), ("Connection", "close")]))
        since = None
        if query.get("since"):
            s, _, frac = query["since"].partition(".")
            since = int(s) * 10**9 + int((frac or "0")[:9].ljust(9, "0"))
        out = b""
        for line in (read(h.path(name, "log")) or "").splitlines():
            t, _, text = line.partition(" ")
            ns = stamp_ns(t)
            if since is not None and ns is not None and ns <= since:
                continue
            data = ((line if truthy(query, "timestamps") else text) + "\n").encode()
            if truthy(query, "stdout"):
                out += data if tty else frame(1, data)
        writer.write(out)
        if truthy(query, "follow") and h.alive(name):
            await writer.drain()
            await unless_gone(reader, h.until_ended(name, h.id_of(name)))


async def main():
    global EMU
    EMU = os.path.abspath(sys.argv[1])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with open(os.path.join(EMU, "addrs")) as f:
        addrs = [a.strip() for a in f if a.strip()]
    engine = Engine(addrs)
    servers = []
    for a, h in engine.hosts.items():
        d = os.path.join(EMU, "hosts-api", a)
        os.makedirs(d, exist_ok=True)
        sock = os.path.join(d, "docker.sock")
        try:
            os.unlink(sock)
        except OSError:
            pass
        servers.append(await asyncio.start_unix_server(
            lambda r, w, h=h: engine.serve(h, r, w), path=sock, backlog=1024))
    stop = asyncio.get_running_loop().create_future()
    for s in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(s, lambda: stop.done() or stop.set_result(None))
    write(os.path.join(EMU, "engine.ready"), "%d\n" % os.getpid())
    print("fake-engine: %d hosts' sockets under %s/hosts-api" % (len(addrs), EMU), file=sys.stderr, flush=True)
    await stop
    for s in servers:
        s.close()
    for h in engine.hosts.values():
        h.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
