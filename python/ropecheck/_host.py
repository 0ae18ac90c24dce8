"""How the gate's kernel calls reach a Python function (docs/python.md, "How calls reach Python").

`ropecheck gate --host-fd FD` runs the whole gate -- every row, property, shrinking, judging, diagnosis -- in its
own process, and sends each kernel call to the process at the other end of socket FD: this one. The protocol is
the kernel host's (gate/isolation.cpp): per channel the gate passes a socket and the arena's memfd
(SCM_RIGHTS); each Command names the rc_rope_args in the arena; the reply carries the return code and, for an
exception, its text. Pointers in the args are the gate's: they are translated by the arena's base.
"""
import faulthandler
import mmap
import os
import pickle
import selectors
import socket
import struct
import sys
import traceback

MAGIC = 0x52435048
COMMAND = struct.Struct("<IIQQQ48QQ48Q")  # gate/host_protocol.hpp Command
REPLY = struct.Struct("<IIQiIQQQiI1024s")    # gate/isolation.cpp Reply
OPEN = struct.Struct("<IIQQ")                # gate/isolation.cpp OpenChannel
K_READY, K_LOAD_FAILED, K_DONE, K_OPEN, K_ENDED = 1, 2, 3, 5, 6
SERVED_APART = 4  # Reply.watch of a kReady: this channel is served by a process of its own (gate/host_protocol.hpp)
assert COMMAND.size == 808 and REPLY.size == 1080 and OPEN.size == 24


class Channel:
    """One KernelHost's channel: its socket and its mapping of the arena."""

    def __init__(self, sock, mm, base, nbytes):
        self.sock, self.mm, self.base, self.nbytes = sock, mm, base, nbytes

    def offset(self, p, n=0):
        """The arena offset of the gate's address p (n bytes from it must lie in the arena too)."""
        o = p - self.base
        if p == 0 or o < 0 or o + n > self.nbytes:
            raise ValueError(f"the gate sent an address outside its arena: {p:#x}")
        return o

    def close(self):
        try:
            self.sock.close()
        finally:
            try:
                self.mm.close()
            except BufferError:  # arrays of a call still refer to it: the collector unmaps it
                pass


def reply(kind, seq=0, rc=0, text=b"", watch=0, fault_addr=0, fault_code=0):
    return REPLY.pack(MAGIC, kind, seq, rc, watch, 0, 0, fault_addr, fault_code, 2, text[:1023])


class _Board:
    """Served apart: what a worker counted so far (call.worker_summary()), posted after each call into memory it
    shares with the serving process, so that a worker that crashes leaves its counts too. Two slots, the header
    (sequence, slot, length) written last: a worker that dies while it posts leaves the previous summary whole."""

    SIZE, HEADER = 1 << 16, struct.Struct("<QII")

    def __init__(self):
        self.mm = mmap.mmap(-1, self.SIZE)  # (anonymous and shared: the fork keeps it shared)
        self.seq = 0

    def post(self, obj):
        data = pickle.dumps(obj)
        half = self.SIZE // 2
        if len(data) > half - 64:
            return
        self.seq += 1
        slot = self.seq & 1
        off = 64 + slot * (half - 32)
        self.mm[off:off + len(data)] = data
        self.mm[0:self.HEADER.size] = self.HEADER.pack(self.seq, slot, len(data))

    def read(self):
        seq, slot, n = self.HEADER.unpack(self.mm[0:self.HEADER.size])
        if seq == 0:
            return None
        off = 64 + slot * (self.SIZE // 2 - 32)
        try:
            return pickle.loads(self.mm[off:off + n])
        except Exception:
            return None


class _Worker:
    """Served apart: the forked process making one channel's calls, as the serving process sees it."""

    def __init__(self, pid, pidfd, sock, board, stack_fd):
        self.pid, self.pidfd, self.sock, self.board, self.stack_fd = pid, pidfd, sock, board, stack_fd

    def close(self):
        for fd in (self.pidfd, self.stack_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.sock.close()
        self.board.mm.close()


def _answer(ch, call, after_call=None):
    """Read one command on the channel and answer it (kDone): False when the gate closed the channel (at the
    command, or before the reply could go)."""
    try:
        data = ch.sock.recv(COMMAND.size)
    except OSError:
        data = b""
    if not data:
        return False
    fields = COMMAND.unpack(data)
    if fields[0] != MAGIC:
        raise RuntimeError("ropecheck: a malformed command from the gate")
    seq, args_off = fields[2], fields[3]
    rc, text = call(ch, args_off)
    if after_call is not None:
        after_call()
    try:
        ch.sock.send(reply(K_DONE, seq, rc, text))
    except OSError:  # the gate closed the channel meanwhile (its budget, a timeout)
        return False
    return True


def _serve_channel(ch, call, ready, after_call=None):
    """Answer the gate on one channel until it closes it: `ready` first, then a kDone per command."""
    ch.sock.send(ready)
    while _answer(ch, call, after_call):
        pass


def _fork_worker(sock, memfd, base, nbytes, call, describe, close_in_child):
    """Served apart: fork the process that makes this channel's calls. It maps the arena, says kReady with
    kServedApart and its pid, and serves the channel until the gate closes it, posting its counts after each call
    (_Board); Python's fault handler writes its stack to a pipe if native code crashes it. This process keeps
    its copy of the socket, to say kEnded when the worker ends otherwise (_worker_ended)."""
    board = _Board()
    stack_r, stack_w = os.pipe()
    summary = getattr(call, "worker_summary", None)
    for f in (sys.stdout, sys.stderr):  # (what is buffered here would be written twice)
        try:
            f.flush()
        except Exception:
            pass
    pid = os.fork()
    if pid == 0:  # the worker: never returns into the caller's stack (os._exit)
        code = 0
        try:
            os.close(stack_r)
            for obj in close_in_child:
                try:
                    obj.close()
                except Exception:
                    pass
            faulthandler.enable(file=stack_w, all_threads=False)
            start = getattr(call, "worker_start", None)
            if start is not None:
                start()  # (its counts start from zero: the summaries are added up here)
            try:
                mm = mmap.mmap(memfd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(memfd)
            ready = getattr(call, "ready", None)
            if ready is not None:
                ready()  # (on CUDA: the device is first touched here, in the worker)
            _serve_channel(Channel(sock, mm, base, nbytes), call,
                           reply(K_READY, text=describe.encode(), watch=SERVED_APART, fault_addr=os.getpid()),
                           (lambda: board.post(summary())) if summary else None)
        except BaseException as e:  # what stops the run: merge_worker raises it in the serving process
            if getattr(call, "stop", None) is None:
                stops = isinstance(e, (KeyboardInterrupt, SystemExit)) or type(e).__name__ == "DeviceError"
                call.stop = e if stops else RuntimeError(
                    "ropecheck: the process serving a channel apart failed:\n" + traceback.format_exc())
        finally:
            try:
                if summary:
                    last = summary()
                    last["clean"] = True
                    board.post(last)
                for f in (sys.stdout, sys.stderr):
                    f.flush()
            finally:
                os._exit(code)
    os.close(stack_w)
    os.close(memfd)
    return _Worker(pid, os.pidfd_open(pid), sock, board, stack_r)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _python_stack(text):
    """Where a worker crashed, from Python's fault handler: the frames above ropecheck's own, innermost first."""
    frames = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("File \""):
            if frames and not line:
                break
            continue
        path, _, rest = line[len("File \""):].partition("\", line ")
        if os.path.dirname(os.path.abspath(path)) == _PACKAGE_DIR:
            break
        lineno, _, func = rest.partition(" in ")
        frames.append(f"{func} ({'/'.join(path.split('/')[-2:])}, line {lineno})")
    if not frames:
        return ""
    s = "in the Python stack: " + frames[0]
    if len(frames) > 1:
        s += ", called from " + ", from ".join(frames[1:4]) + (" ..." if len(frames) > 4 else "")
    return s


def _worker_ended(w, call):
    """A worker ended: merge its summary (raising what stopped it) and, when it did not end by the channel's end
    (a crash, an exit), tell the gate with kEnded and where Python's fault handler saw it crash."""
    _, status = os.waitpid(w.pid, 0)
    stack = b""
    while len(stack) < 1 << 20:
        try:
            chunk = os.read(w.stack_fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        stack += chunk
    summary = w.board.read()
    try:
        if summary is not None and hasattr(call, "merge_worker"):
            call.merge_worker(summary)  # (raises a KeyboardInterrupt, SystemExit or DeviceError that stopped it)
        if not (summary is not None and summary.get("clean") and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            signalled = os.WIFSIGNALED(status)
            rc = os.WTERMSIG(status) if signalled else os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
            if hasattr(call, "calls"):
                call.calls += 1  # (the call it ended in: the gate counts it, crashed; the worker could not post it)
            where = _python_stack(stack.decode("utf-8", "replace")).encode()
            try:
                w.sock.send(reply(K_ENDED, rc=rc, text=where, fault_code=1 if signalled else 0))
            except OSError:  # the gate closed the channel already (it killed a hung call's process)
                pass
    finally:
        w.close()


def serve(proc, control, call, describe, poll_seconds=0.2, apart=False):
    """Serve the gate process `proc` on `control` until it exits. call(channel, args_offset) -> (rc, text bytes)
    makes one kernel call; `describe` is the line the gate's sandbox line quotes. An exception out of `call`
    (KeyboardInterrupt: the user stopped the run) ends the gate and propagates. apart=True: each channel is served
    by a process forked for it (check(isolated=True)), so that a crash ends only that process."""
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ, None)
    channels, workers = [], []
    try:
        while True:
            events = sel.select(timeout=poll_seconds)
            if not events:
                if proc.poll() is not None:
                    break
                continue
            for key, _ in events:
                ch = key.data
                if isinstance(ch, _Worker):
                    sel.unregister(ch.pidfd)
                    workers.remove(ch)
                    _worker_ended(ch, call)
                    continue
                if ch is None:
                    try:
                        msg, fds, _, _ = socket.recv_fds(control, OPEN.size, 2)
                    except OSError:
                        msg, fds = b"", []
                    if not msg:
                        sel.unregister(control)
                        continue
                    magic, kind, base, nbytes = OPEN.unpack(msg)
                    if magic != MAGIC or kind != K_OPEN or len(fds) != 2:
                        for fd in fds:
                            os.close(fd)
                        raise RuntimeError("ropecheck: a malformed message from the gate on the control socket")
                    sock = socket.socket(fileno=fds[0])
                    if apart:
                        w = _fork_worker(sock, fds[1], base, nbytes, call, describe, [control, sel] + workers)
                        workers.append(w)
                        sel.register(w.pidfd, selectors.EVENT_READ, w)
                        continue
                    try:
                        mm = mmap.mmap(fds[1], nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                    finally:
                        os.close(fds[1])
                    ch = Channel(sock, mm, base, nbytes)
                    channels.append(ch)
                    sel.register(sock, selectors.EVENT_READ, ch)
                    sock.send(reply(K_READY, text=describe.encode()))
                    continue
                if not _answer(ch, call):  # (the channel closed: the reader's end goes with it)
                    sel.unregister(ch.sock)
                    channels.remove(ch)
                    ch.close()
        # The gate has exited: its workers read the channels' end; collect what they counted.
        for w in list(workers):
            sel.unregister(w.pidfd)
            workers.remove(w)
            _worker_ended(w, call)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        for w in workers:  # (a run stopped: its workers go with it)
            try:
                os.kill(w.pid, 9)
                os.waitpid(w.pid, 0)
            except OSError:
                pass
            w.close()
        for ch in channels:
            ch.close()
        sel.close()
    proc.wait()
