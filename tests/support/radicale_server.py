"""A real Radicale (CalDAV and CardDAV) server on 127.0.0.1 for the calendar and contacts tests.

It runs as its own process from the installed package (pinned in the test extras), with its
storage in the test's tmp folder and plain htpasswd auth; the tests seed it through the protocol
(MKCALENDAR, MKCOL, PUT), never by writing its storage. Nothing here reaches outside the machine.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import caldav
import httpx

USER = "anna"
# A throwaway password of this test server only; the tests look for it in the log's bytes.
PASSWORD = "radicale-Zq7-never-logged"

_ADDRESSBOOK = b"""<?xml version="1.0" encoding="utf-8"?>
<D:mkcol xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:carddav"><D:set><D:prop>
<D:resourcetype><D:collection/><C:addressbook/></D:resourcetype></D:prop></D:set></D:mkcol>"""


@dataclass
class Radicale:
    port: int

    @property
    def pattern(self) -> str:
        """This server as a [network] allow entry."""
        return f"127.0.0.1:{self.port}"

    @property
    def calendar_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{USER}/home/"

    @property
    def contacts_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{USER}/contacts/"

    def calendar(self) -> caldav.Calendar:
        client = caldav.DAVClient(self.calendar_url, username=USER, password=PASSWORD, enable_rfc6764=False, require_tls=False)
        return client.calendar(url=self.calendar_url)

    def put_event(self, ical: str) -> None:
        self.calendar().save_event(ical)

    def event(self, uid: str) -> str | None:
        """The event's iCalendar text as the server has it now, or None."""
        try:
            return self.calendar().event_by_uid(uid).data
        except caldav.lib.error.NotFoundError:
            return None

    def put_card(self, uid: str, vcard: str) -> None:
        r = httpx.put(f"{self.contacts_url}{uid}.vcf", content=vcard, auth=(USER, PASSWORD),
                      headers={"Content-Type": "text/vcard; charset=utf-8"})
        assert r.status_code in (201, 204), r.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def radicale(folder: Path) -> Iterator[Radicale]:
    """Radicale with an empty calendar ``home`` and address book ``contacts`` of user anna."""
    folder.mkdir(parents=True, exist_ok=True)
    users = folder / "users"
    users.write_text(f"{USER}:{PASSWORD}\n")
    port = _free_port()
    config = folder / "config"
    config.write_text(f"[server]\nhosts = 127.0.0.1:{port}\n[auth]\ntype = htpasswd\nhtpasswd_filename = {users}\n"
                      f"htpasswd_encryption = plain\n[storage]\nfilesystem_folder = {folder / 'store'}\n"
                      "[logging]\nlevel = warning\n")
    log = open(folder / "radicale.log", "wb")  # noqa: SIM115 - closed below, after the process
    proc = subprocess.Popen([sys.executable, "-m", "radicale", "--config", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"radicale did not start: {(folder / 'radicale.log').read_text()}") from None
                time.sleep(0.1)
        server = Radicale(port)
        principal = caldav.DAVClient(f"http://127.0.0.1:{port}/{USER}/", username=USER, password=PASSWORD,
                                     enable_rfc6764=False, require_tls=False).principal()
        principal.make_calendar(name="Home", cal_id="home")
        r = httpx.request("MKCOL", server.contacts_url, content=_ADDRESSBOOK, auth=(USER, PASSWORD))
        assert r.status_code == 201, r.text
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
