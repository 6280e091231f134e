"""Headless Chromium (Debian's `chromium-headless-shell`, or `chromium`) driven over the Chrome
DevTools Protocol on a pipe (`--remote-debugging-pipe`): JSON messages, each ended by a NUL
byte, on the browser's file descriptors 3 (to it) and 4 (from it).

The pipe needs no port and no websocket client (the standard library has none), and unlike
`--dump-dom` it lets a test read the page while it runs, as often as it likes, and see the
very responses the page's script received (the Network domain). Playwright would bring a
driver of its own to point at the same binary; this is a hundred lines of the standard
library.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

BINARIES = ("chromium-headless-shell", "chromium")
"""Debian's packages: the headless shell alone (lighter), or the whole browser."""
TIMEOUT = 20.0


class BrowserError(RuntimeError):
    """The browser answered a command with an error, or not at all."""


def find_chromium() -> str | None:
    """The first of BINARIES on PATH, or None."""
    for name in BINARIES:
        path = shutil.which(name)
        if path is not None:
            return path
    return None


class Chromium:
    """One headless browser process, its profile in `profile`; stopped by `close()`."""

    def __init__(self, binary: str, profile: Path, width: int = 1280, height: int = 1000) -> None:
        to_browser_read, to_browser = os.pipe()
        from_browser, from_browser_write = os.pipe()
        # bash, not sh: dash's redirections take single-digit descriptors only, and these are
        # moved above 9 so that they never are 3 or 4 themselves.
        child_read = fcntl.fcntl(to_browser_read, fcntl.F_DUPFD_CLOEXEC, 10)
        child_write = fcntl.fcntl(from_browser_write, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_browser_read)
        os.close(from_browser_write)
        flags = [
            "--headless",
            "--remote-debugging-pipe",
            # Its sandbox needs user namespaces, which containers and root lack; the browser
            # loads only the broker's page on 127.0.0.1.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self.stderr_path = profile / "chromium.stderr"
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [
                    "bash",
                    "-c",
                    f'exec "$0" "$@" 3<&{child_read} 4>&{child_write} '
                    f"{child_read}<&- {child_write}>&-",
                    binary,
                    *flags,
                ],
                pass_fds=(child_read, child_write),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        os.close(child_read)
        os.close(child_write)
        self._to_browser = to_browser
        self._from_browser = from_browser
        self._ids = count(1)
        self._answers: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        """Every event the browser sent, in order (read by a thread of its own, so that
        the browser never waits on a full pipe)."""
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="chromium-cdp", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while data := os.read(self._from_browser, 1 << 16):
            buffer += data
            *messages, buffer = buffer.split(b"\0")
            with self._arrived:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._answers[message["id"]] = message
                    else:
                        self.events.append(message)
                self._arrived.notify_all()

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send a command (to a page's `session`, or to the browser) and return its result."""
        number = next(self._ids)
        message: dict[str, Any] = {"id": number, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        with self._arrived:
            if not self._arrived.wait_for(lambda: number in self._answers, TIMEOUT):
                raise BrowserError(f"{method}: no answer in {TIMEOUT:g} s\n{self.stderr_tail()}")
            answer = self._answers.pop(number)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return dict(answer.get("result", {}))

    def events_of(self, session: str, method: str) -> list[dict[str, Any]]:
        with self._arrived:
            return [
                event["params"]
                for event in self.events
                if event.get("sessionId") == session and event["method"] == method
            ]

    def open(self, url: str) -> Page:
        """A new tab loading `url`, with its network events recorded."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        page = Page(self, session)
        self.call("Network.enable", session)
        self.call("Page.enable", session)
        self.call("Page.navigate", session, url=url)
        return page

    def stderr_tail(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-2000:]

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close")
        try:
            self.process.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        self._reader.join(TIMEOUT)
        os.close(self._from_browser)


class Page:
    """One tab of a Chromium."""

    def __init__(self, browser: Chromium, session: str) -> None:
        self.browser = browser
        self.session = session

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise's, once settled)."""
        result = self.browser.call(
            "Runtime.evaluate",
            self.session,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = TIMEOUT) -> Any:
        """The expression's value once it is truthy, evaluated every 50 ms."""
        deadline = time.monotonic() + timeout
        while not (value := self.evaluate(expression)):
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression!r} still false after {timeout:g} s")
            time.sleep(0.05)
        return value

    def responses(self, path: str) -> Iterator[bytes]:
        """The bodies of the responses the page has received so far for URLs ending in
        `path`, in the order it asked for them."""
        asked = {
            event["requestId"]: event["request"]["url"]
            for event in self.browser.events_of(self.session, "Network.requestWillBeSent")
        }
        finished = self.browser.events_of(self.session, "Network.loadingFinished")
        for event in finished:
            if asked.get(event["requestId"], "").endswith(path):
                body = self.browser.call(
                    "Network.getResponseBody", self.session, requestId=event["requestId"]
                )
                text = body["body"]
                yield base64.b64decode(text) if body["base64Encoded"] else text.encode()

    def screenshot(self, path: Path) -> None:
        """The page as it shows now, as a PNG, as tall as its content."""
        size = self.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
        )
        shot = self.browser.call(
            "Page.captureScreenshot",
            self.session,
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1},
        )
        path.write_bytes(base64.b64decode(shot["data"]))
