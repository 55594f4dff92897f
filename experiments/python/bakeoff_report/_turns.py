"""The rank's end of a lockstep group's turn channel (docs/lockstep.md, "The turn
channel"): ASCII lines over the Unix stream socket the worker passes as BAKEOFF_TURN_FD.

    rank -> worker: `warmup`, `step`, `done`, `end`
    worker -> rank: `go T` (T: the group's turn number, a decimal integer >= 0), or
                    `go -1` (this side takes no more turns: go on without them)

Every call is best effort: end of file, an error on the socket, or an answer that is not
`go T` closes the channel, and the rank goes on without turns; nothing here raises into
the training loop (a signal handler's exception, KeyboardInterrupt, still does). Reads
and writes are os.read/os.write on the descriptor: no buffering between the rank and the
worker. Standard library only.

Thread-safety: not thread-safe. The training loop's thread calls it, through Run.step().
"""

import os
import stat
import sys

__all__ = ["TurnChannel", "from_environment"]

# An answer is `go T`; anything longer than this without a newline is not one.
MAX_LINE_BYTES = 64


class TurnChannel:
    """One rank's turns on descriptor `fd` (a connected Unix stream socket). The channel
    owns `fd` and closes it when it ends. `holding` is the turn it holds (None,
    "warmup" or "step")."""

    def __init__(self, fd):
        self._fd = fd
        self._buffer = b""
        self.holding = None
        self.warmup_asked = False  # a warm-up turn is asked for once, before any step
        try:
            # Blocking reads (a turn is waited for, docs/lockstep.md); not inherited by
            # programs the rank executes, which would keep the worker from seeing it end.
            os.set_blocking(fd, True)
            os.set_inheritable(fd, False)
        except OSError:
            self._close()
            return
        # A forked child (a DataLoader worker) closes its copy: only the rank holds it.
        os.register_at_fork(after_in_child=self._forget)

    @property
    def open(self):
        return self._fd is not None

    def take(self, kind):
        """Asks for a turn (`kind`: "warmup" or "step") and waits for `go T`. Returns T,
        or None when the channel is closed (now or before): go on without turns."""
        if not self._send(kind):
            return None
        line = self._read_line()
        if line is None:
            return None
        word, _, number = line.partition(b" ")
        if line == b"go -1":
            self._close()  # the side left the rotation (or the group gave up on it)
            return None
        if word != b"go" or not number.isdigit():
            self._give_up(f"the worker answered {line[:MAX_LINE_BYTES]!r}, not 'go T'")
            return None
        self.holding = kind
        return int(number)

    def give_back(self):
        """Sends `done` for the turn held (nothing when none is held)."""
        if self.holding is not None:
            self.holding = None
            self._send("done")

    def end(self):
        """Sends `end` (it also gives back a turn held) and closes the channel."""
        if self._fd is not None:
            self._send("end")
            self._close()

    # ---- the socket ----
    def _send(self, message):
        if self._fd is None:
            return False
        data = (message + "\n").encode("ascii")
        try:
            while data:
                data = data[os.write(self._fd, data):]
        except OSError:  # EPIPE, ECONNRESET, EBADF: the worker is gone
            self._close()
            return False
        return True

    def _read_line(self):
        """One line without its newline, or None at end of file or on an error."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE_BYTES:
                self._give_up(f"the worker sent {len(self._buffer)} bytes without a newline")
                return None
            try:
                chunk = os.read(self._fd, MAX_LINE_BYTES)
            except OSError:
                chunk = b""
            if not chunk:  # end of file: the worker is gone; send nothing more
                self._close()
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _give_up(self, why):
        # A worker speaking something else is a bug worth a line in the rank's log;
        # closing the socket means `end` to the worker.
        print(f"bakeoff_report: turn channel: {why}; going on without turns", file=sys.stderr, flush=True)
        self._close()

    def _close(self):
        fd, self._fd = self._fd, None
        self.holding = None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def _forget(self):
        self._close()


def from_environment(environ=None):
    """The channel named by BAKEOFF_TURN_FD, or None without one (any order but
    lockstep, or no worker). The variable is removed from the environment, so a program
    the rank starts never takes it for a descriptor of its own. A value that is not an
    open socket's descriptor is ignored with a line on stderr."""
    environ = os.environ if environ is None else environ
    value = environ.pop("BAKEOFF_TURN_FD", None)
    if not value:
        return None
    try:
        fd = int(value)
        if fd < 0 or not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise ValueError("not a socket")
    except (ValueError, OSError) as error:
        print(f"bakeoff_report: BAKEOFF_TURN_FD={value!r} is not an open socket ({error}); "
              "going on without turns", file=sys.stderr, flush=True)
        return None
    return TurnChannel(fd)
