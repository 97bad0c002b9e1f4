"""Real mail servers on 127.0.0.1 for the mail executors' tests.

* IMAP: Debian's dovecot (``apt-get install dovecot-imapd``), run in the
  foreground from a config file in the test's tmp folder: a passwd-file
  passdb, maildirs in tmp, implicit TLS on a free port with a throwaway
  self-signed certificate. Nothing under /etc, /var or /run is written.
* SMTP: aiosmtpd, with STARTTLS (the same certificate) and AUTH LOGIN/PLAIN
  after it, keeping every message that arrives.

The certificate is made with ``cryptography`` for 127.0.0.1 (an IP SAN), so
clients verify it against its PEM like any other CA.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from ipaddress import IPv4Address
from pathlib import Path

import pytest

DOVECOT = shutil.which("dovecot") or ("/usr/sbin/dovecot" if os.path.exists("/usr/sbin/dovecot") else None)


def require_dovecot() -> None:
    """Skip without dovecot, unless METNOS_REQUIRE_DOVECOT says it must be there (CI)."""
    if DOVECOT:
        return
    if os.environ.get("METNOS_REQUIRE_DOVECOT"):
        pytest.fail("METNOS_REQUIRE_DOVECOT is set but dovecot is not installed (apt-get install dovecot-imapd)")
    pytest.skip("dovecot is not installed (apt-get install dovecot-imapd; ./install.sh --test does)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Certificate:
    cert_pem: bytes
    key_pem: bytes

    def write(self, folder: Path) -> tuple[Path, Path]:
        cert, key = folder / "cert.pem", folder / "key.pem"
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return cert, key


def self_signed(host: str = "127.0.0.1") -> Certificate:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(IPv4Address(host))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return Certificate(cert.public_bytes(serialization.Encoding.PEM),
                       key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))


# ---------------------------------------------------------------- IMAP


@dataclass
class Dovecot:
    root: Path
    port: int
    user: str
    password: str
    cert: Certificate
    uid: int
    gid: int

    @property
    def pattern(self) -> str:
        return f"127.0.0.1:{self.port}"

    def maildir(self, folder: str = "INBOX") -> Path:
        base = self.root / "mail" / self.user
        return base if folder == "INBOX" else base / f".{folder}"

    def deliver(self, message: EmailMessage, *, folder: str = "INBOX", seen: bool = False, stamp: int = 0) -> Path:
        """A message put straight into the maildir: ``new/`` unread, ``cur/`` with the S flag read."""
        box = self.maildir(folder)
        for sub in ("cur", "new", "tmp"):
            (box / sub).mkdir(parents=True, exist_ok=True)
        for d in (self.root / "mail").rglob("*"):
            if d.is_dir():
                _owned_by(d, self.uid, self.gid)
        unique = f"{1700000000 + stamp}.M{stamp}P{os.getpid()}.metnos-test"
        path = box / "cur" / f"{unique}:2,S" if seen else box / "new" / unique
        path.write_bytes(bytes(message))
        _owned_by(path, self.uid, self.gid)
        return path

    def flags_on_disk(self, folder: str = "INBOX") -> dict[str, str]:
        """Message-Id -> the maildir flags dovecot keeps in the file name ('' for none)."""
        out = {}
        box = self.maildir(folder)
        for sub in ("cur", "new"):
            for f in (box / sub).glob("*"):
                msg_id = next((line.split(b":", 1)[1].strip().decode() for line in f.read_bytes().splitlines()
                               if line.lower().startswith(b"message-id:")), f.name)
                out[msg_id] = f.name.split(":2,", 1)[1] if ":2," in f.name else ""
        return out


_DOVECOT_CONF = """\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
info_log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = required
ssl_cert = <{cert}
ssl_key = <{key}
auth_mechanisms = plain login
disable_plaintext_auth = yes
first_valid_uid = 0
mail_location = maildir:{root}/mail/%u
service imap-login {{
  inet_listener imap {{
    port = 0
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {port}
    ssl = yes
  }}
}}
{unprivileged}passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={root}/home/%u
}}
"""


# Not root: every helper runs as the caller (the defaults are dovecot's own users), without a
# chroot (only root can), and auth reads the passwd-file in the caller's private tmp folder.
_UNPRIVILEGED = """\
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
service auth {{
  user = {user}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
"""


def _greets(port: int, cert: Certificate) -> bool:
    """Whether dovecot answers a TLS client with its IMAP greeting (listening is not yet serving)."""
    context = ssl.create_default_context(cadata=cert.cert_pem.decode())
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.recv(64).startswith(b"* OK")
    except OSError:
        return False


def _owned_by(path: Path, uid: int, gid: int) -> None:
    if os.getuid() == 0:
        os.chown(path, uid, gid)


@contextmanager
def dovecot(tmp: Path, *, user: str = "anna", password: str = "imap-secret-pw-7d1e") -> Iterator[Dovecot]:
    """Dovecot in the foreground on a free port, serving ``<root>/mail/<user>``; stopped on exit.

    Unprivileged, everything lives in ``tmp`` and runs as the caller. As root (CI containers),
    dovecot will not run mail processes as uid 0: they run as its own ``dovecot`` user, in a
    folder of their own under the system's temporary directory that this removes on exit.
    """
    require_dovecot()
    import grp
    import pwd
    import tempfile

    if os.getuid() == 0:
        owner = pwd.getpwnam("dovecot")
        root = Path(tempfile.mkdtemp(prefix="metnos-dovecot-"))
        root.chmod(0o755)
    else:
        owner = pwd.getpwuid(os.getuid())
        root = tmp
        root.mkdir(parents=True, exist_ok=True)
        group = grp.getgrgid(owner.pw_gid).gr_name
    uid, gid = owner.pw_uid, owner.pw_gid
    for sub in ("state", "mail", "home"):
        (root / sub).mkdir(exist_ok=True)
    for sub in ("mail", "home"):
        _owned_by(root / sub, uid, gid)
    cert = self_signed()
    cert_file, key_file = cert.write(root)
    passwd = root / "passwd"
    passwd.write_text(f"{user}:{{PLAIN}}{password}::::::\n")
    passwd.chmod(0o600)
    _owned_by(passwd, uid, gid)
    port = free_port()
    conf = root / "dovecot.conf"
    conf.write_text(_DOVECOT_CONF.format(root=root, cert=cert_file, key=key_file, port=port, uid=uid, gid=gid,
                                         unprivileged="" if os.getuid() == 0 else _UNPRIVILEGED.format(user=owner.pw_name, group=group)))
    proc = subprocess.Popen([DOVECOT, "-F", "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while not _greets(port, cert):
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read().decode(errors="replace") if proc.poll() is not None else ""
                log = (root / "dovecot.log").read_text(errors="replace") if (root / "dovecot.log").exists() else ""
                pytest.fail(f"dovecot did not start on port {port}: {out}\n{log}")
            time.sleep(0.05)
        yield Dovecot(root, port, user, password, cert, uid, gid)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if root != tmp:
            shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- SMTP


@dataclass
class SmtpServer:
    port: int
    user: str
    password: str
    cert: Certificate
    received: list[dict] = field(default_factory=list)
    logins: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def pattern(self) -> str:
        return f"127.0.0.1:{self.port}"


@contextmanager
def smtp_server(*, user: str = "anna", password: str = "smtp-secret-pw-93bc", cert: Certificate | None = None) -> Iterator[SmtpServer]:
    """aiosmtpd on a free port: STARTTLS required before AUTH, every message kept in ``received``.
    ``cert``: another server's certificate to present (one account's ``ca_file`` then trusts both)."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    cert = cert or self_signed()
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        cert_file, key_file = cert.write(Path(d))
        tls.load_cert_chain(cert_file, key_file)
    state = SmtpServer(free_port(), user, password, cert)

    class Handler:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802, ANN001, ANN201
            state.received.append({"from": envelope.mail_from, "to": list(envelope.rcpt_tos),
                                   "data": envelope.content.decode("utf-8", errors="replace"),
                                   "authenticated": bool(session.authenticated)})
            return "250 OK"

    def authenticate(server, session, envelope, mechanism, auth_data):  # noqa: ANN001, ANN202
        ok = isinstance(auth_data, LoginPassword) and auth_data.login.decode() == user and auth_data.password.decode() == password
        state.logins.append((auth_data.login.decode() if isinstance(auth_data, LoginPassword) else "?", ok))
        return AuthResult(success=ok)

    controller = Controller(Handler(), hostname="127.0.0.1", port=state.port, tls_context=tls, require_starttls=True,
                            auth_required=True, auth_require_tls=True, authenticator=authenticate, ready_timeout=10)
    controller.start()
    try:
        yield state
    finally:
        controller.stop()
