"""uvicorn, with a clean exit: SIGTERM/SIGINT stop the server and the process then finishes its own
shutdown (Raft, store flush) and exits 0, instead of uvicorn re-raising the signal at the end."""

from __future__ import annotations

import signal
from types import FrameType

import uvicorn


class GracefulServer(uvicorn.Server):
    stopped_by: int | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stopped_by = sig
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True
