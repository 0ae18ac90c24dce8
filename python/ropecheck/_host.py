"""How the gate's kernel calls reach a Python function (docs/python.md, "How calls reach Python").

`ropecheck gate --host-fd FD` runs the whole gate -- every row, property, shrinking, judging, diagnosis -- in its
own process, and sends each kernel call to the process at the other end of socket FD: this one. The protocol is
the kernel host's (gate/isolation.cpp): per channel the gate passes a socket and the arena's memfd
(SCM_RIGHTS); each Command names the rc_rope_args in the arena; the reply carries the return code and, for an
exception, its text. Pointers in the args are the gate's: they are translated by the arena's base.
"""
import mmap
import os
import selectors
import socket
import struct

MAGIC = 0x52435048
COMMAND = struct.Struct("<IIQQQ48QQ48Q")  # gate/host_protocol.hpp Command
REPLY = struct.Struct("<IIQiIQQQiI1024s")    # gate/isolation.cpp Reply
OPEN = struct.Struct("<IIQQ")                # gate/isolation.cpp OpenChannel
K_READY, K_LOAD_FAILED, K_DONE, K_OPEN = 1, 2, 3, 5
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


def reply(kind, seq=0, rc=0, text=b""):
    return REPLY.pack(MAGIC, kind, seq, rc, 0, 0, 0, 0, 0, 2, text[:1023])


def serve(proc, control, call, describe, poll_seconds=0.2):
    """Serve the gate process `proc` on `control` until it exits. call(channel, args_offset) -> (rc, text bytes)
    makes one kernel call; `describe` is the line the gate's sandbox line quotes. An exception out of `call`
    (KeyboardInterrupt: the user stopped the run) ends the gate and propagates."""
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ, None)
    channels = []
    try:
        while True:
            events = sel.select(timeout=poll_seconds)
            if not events:
                if proc.poll() is not None:
                    break
                continue
            for key, _ in events:
                ch = key.data
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
                    try:
                        mm = mmap.mmap(fds[1], nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                    finally:
                        os.close(fds[1])
                    ch = Channel(sock, mm, base, nbytes)
                    channels.append(ch)
                    sel.register(sock, selectors.EVENT_READ, ch)
                    sock.send(reply(K_READY, text=describe.encode()))
                    continue
                try:
                    data = ch.sock.recv(COMMAND.size)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(ch.sock)
                    channels.remove(ch)
                    ch.close()
                    continue
                fields = COMMAND.unpack(data)
                if fields[0] != MAGIC:
                    raise RuntimeError("ropecheck: a malformed command from the gate")
                seq, args_off = fields[2], fields[3]
                rc, text = call(ch, args_off)
                try:
                    ch.sock.send(reply(K_DONE, seq, rc, text))
                except OSError:  # the gate closed the channel meanwhile (its budget, a timeout)
                    pass
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        for ch in channels:
            ch.close()
        sel.close()
    proc.wait()
