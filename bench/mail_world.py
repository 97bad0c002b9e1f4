"""The mail world of the agent benchmark's mail tasks: dovecot (IMAP) and aiosmtpd (SMTP) on
127.0.0.1, started the way tests/integration/test_mail.py starts them, with a school's mail in the
inbox, an account for each in config.toml and their passwords in the vault."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

from tests.support.mail_servers import DOVECOT, Dovecot, SmtpServer, dovecot, smtp_server

SCHOOL = "Scuola Elementare Rodari <segreteria@scuola-rodari.example>"
ELENA = "elena.rossi@friends.example"
ADDRESS = "Via Garibaldi 21, Torino"


def _mail(sender: str, subject: str, body: str, n: int) -> EmailMessage:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = sender, "anna@home.example", subject
    # Today, as the request says: a few hours ago (and the maildir file's time, IMAP's INTERNALDATE, is now).
    m["Date"] = format_datetime(datetime.now(timezone.utc).astimezone() - timedelta(hours=4 - n))
    m["Message-Id"] = f"<bench{n}@test>"
    m.set_content(body)
    return m


@dataclass
class MailWorld:
    imap: Dovecot
    smtp: SmtpServer
    root: Path

    def allow(self) -> list[str]:
        return [self.imap.pattern, self.smtp.pattern]

    def config(self) -> str:
        """config.toml's [mail] tables: one account that reads and sends, as a user sets one up; its CA
        file holds the throwaway certificate both servers present (two self-signed certificates with
        one subject in a CA file make OpenSSL trust only the first, and SMTP failed to verify)."""
        ca = self.root / "ca.pem"
        ca.write_bytes(self.imap.cert.cert_pem)
        return (f'\n[mail]\ndefault_account = "home"\n\n[mail.accounts.home]\nusername = "{self.imap.user}"\n'
                f'imap_host = "127.0.0.1"\nimap_port = {self.imap.port}\nsmtp_host = "127.0.0.1"\nsmtp_port = {self.smtp.port}\n'
                f'from_address = "Anna <anna@home.example>"\nca_file = "{ca}"\n\n'
                f'[mail.recipients]\nelena = "{ELENA}"\n')

    def store_passwords(self, env: dict[str, str]) -> None:
        """One account, one password: the servers are given the same one."""
        done = subprocess.run([sys.executable, "-m", "metnos", "mail", "password", "home"], env=env, cwd=env["HOME"],
                              input=self.imap.password + "\n", capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"metnos mail password home failed: {done.stderr.strip()[-300:]}")

    def prepare(self, env: dict[str, str]) -> None:
        self.store_passwords(env)

    def sent(self) -> list[dict[str, Any]]:
        return list(self.smtp.received)

    def outcome(self) -> dict[str, Any]:
        """What the tasks' checks read (bench/agent_suite.py's Outcome)."""
        return {"mail_sent": self.sent()}


@contextmanager
def mail_world() -> Iterator[MailWorld]:
    if not DOVECOT:
        raise RuntimeError("dovecot is not installed (apt-get install dovecot-imapd): the mail tasks need it")
    root = Path(tempfile.mkdtemp(prefix="agentbench-mail-"))
    try:
        with dovecot(root / "dovecot") as imap, smtp_server(user=imap.user, password=imap.password, cert=imap.cert) as smtp:
            imap.deliver(_mail(SCHOOL, "Uscita didattica di venerdì", "Venerdì la classe va al museo egizio: "
                               "portare il pranzo al sacco e 5 euro.", 1), stamp=1)
            imap.deliver(_mail("offerte@shop.example", "Saldi", "Tutto al 50%.", 2), stamp=2)
            imap.deliver(_mail(SCHOOL, "Menu della mensa", "Menu di aprile, già letto.", 3), seen=True, stamp=3)
            yield MailWorld(imap, smtp, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
