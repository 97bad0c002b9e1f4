"""``metnos rebuild [PROJECTION]``: refold read models from the log, with a progress bar."""

from __future__ import annotations

import argparse
import sys
import time

from metnos.settings.loader import in_force


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rebuild", help="empty projections and fold them again from the log")
    p.add_argument("projection", nargs="*", help="which ones (default: all)")
    p.add_argument("--workers", type=_positive, default=None,
                   help="processes that fold, each taking a share of the projections (default: one per core on a big log, else 1)")
    p.set_defaults(run=run)


class ProgressBar:
    def __init__(self, stream=sys.stderr, width: int = 30) -> None:  # noqa: ANN001
        self.stream = stream
        self.width = width
        self._last = 0.0

    def __call__(self, name: str, position: int, head: int) -> None:
        now = time.monotonic()
        if now - self._last < 0.1 and position < head:
            return
        self._last = now
        done = position / head if head else 1.0
        filled = int(done * self.width)
        self.stream.write(f"\r{name:<12} [{'#' * filled}{'.' * (self.width - filled)}] {position}/{head}")
        self.stream.flush()


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        msg = f"must be 1 or more, not {value}"
        raise argparse.ArgumentTypeError(msg)
    return value


def run(args: argparse.Namespace) -> int:
    from metnos.runtime.booted import Runtime
    from replay.rebuild import rebuild

    bar = ProgressBar() if sys.stderr.isatty() else None
    with Runtime.boot(in_force().workspace, birth=False) as rt:
        started = time.perf_counter()
        sizes = rebuild(rt, args.projection, progress=bar, workers=args.workers)
        elapsed = time.perf_counter() - started
        head = rt.log.recorder.max_notification_id() or 0
    if bar is not None:
        sys.stderr.write("\n")
    for name, size in sizes.items():
        print(f"rebuilt {name}: {size} bytes")
    print(f"{len(sizes)} projections over {head} events in {elapsed:.2f} s")
    return 0
