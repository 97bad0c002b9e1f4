"""The device's side of remote executors: what `metnos device serve` answers (docs/remote.md).

POST /executor receives a signed executor once: the folder is checked against
the device's own copy of the instance's public key (from pairing) and against
the digest the server names, and only then cached. POST /call checks the
cached version against the server's (drift), checks the cached folder again
(a file changed on the device since is refused), takes before-images of the
paths the call may write, runs it in the device's own sandbox (bubblewrap,
with this workspace's forbidden paths) and answers the outcome with the
"after" record. POST /undo puts the paths of a call back from those images,
unless one changed since the call (then only when forced). POST /revoked is the
server telling the device it revoked it: from then on the device refuses the
server's calls, also after a restart (a marker kept beside its keys).
Every fact, refusals too, goes to the device's audit trail (a JSON line each,
in the workspace's audit folder), keyed by the server's trace id.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import threading
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from nacl.encoding import HexEncoder
from nacl.signing import VerifyKey

from domain.remote import RemoteRefused, check_drift
from metnos.mechanisms.blobs import BlobStore
from metnos.mechanisms.executors.context import build_ctx
from metnos.mechanisms.executors.loader import LoadedExecutor
from metnos.mechanisms.executors.signing import verify_executor
from metnos.mechanisms.filestate import put_back, same, take
from metnos.mechanisms.invocation.capture import FileCapture
from metnos.mechanisms.invocation.runner import invoke
from metnos.mechanisms.remote.server import CallServer
from metnos.mechanisms.remote.tls import server_context
from metnos.mechanisms.sandbox.policy import writes_narrowed_to_arguments
from metnos.services.devices import DeviceFiles, device_files
from metnos.settings.workspace import Workspace

MAX_EXECUTOR_FILES = 200


class DeviceHost:
    def __init__(self, workspace: Workspace, env: dict[str, str] | None = None) -> None:
        self.workspace = workspace
        self.env = env
        self.files: DeviceFiles = device_files(workspace)
        if not self.files.paired:
            raise RemoteRefused("device-unpaired", "this device is not paired; run `metnos pair CODE --server URL` first")
        self.pairing = json.loads(self.files.pairing.read_text())
        self.verify_key = VerifyKey(self.files.instance_pub.read_text().strip().encode(), encoder=HexEncoder)
        self.cache = workspace.data_dir / "device" / "executors"
        self.audit_path = workspace.audit_dir / "device.jsonl"
        self.blobs = BlobStore(workspace.blobs_dir)
        self.capture = FileCapture(workspace=workspace, blobs=self.blobs, env=env)
        # Before-images by trace id, kept on disk so an undo outlives a restart of the listener.
        self.before_dir = workspace.data_dir / "device" / "before"
        self._audit_lock = threading.Lock()
        self._listener: CallServer | None = None

    # The audit trail: append-only, one fact a line.
    def audit(self, fact: str, **fields: Any) -> None:
        line = {"at": datetime.now(timezone.utc).isoformat(), "fact": fact, **fields}
        self.audit_path.parent.mkdir(parents=True, exist_ok=True)
        with self._audit_lock, self.audit_path.open("a") as out:
            out.write(json.dumps(line, sort_keys=True, default=str) + "\n")

    def current_digest(self, name: str) -> str | None:
        marker = self.cache / name / "CURRENT"
        return marker.read_text().strip() if marker.is_file() else None

    def receive(self, body: dict[str, Any]) -> dict[str, Any]:
        """Cache a pushed executor once its signature and digests hold under the instance's key."""
        name, digest = str(body.get("name", "")), str(body.get("digest", ""))
        files = body.get("files") or {}
        if not name.isidentifier() or not digest or not isinstance(files, dict) or len(files) > MAX_EXECUTOR_FILES:
            raise RemoteRefused("executor-malformed", "a pushed executor needs a name, its digest and its files; push it again")
        if self.current_digest(name) == digest:
            return {"name": name, "digest": digest, "cached": "already"}
        staging = self.cache / ".incoming" / f"{name}-{digest.replace(':', '-')}"
        shutil.rmtree(staging, ignore_errors=True)
        for relative, data in files.items():
            target = staging / _inside(relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(data))
        self._verified(staging, name, digest)
        final = self.cache / name / digest.replace(":", "-")
        shutil.rmtree(final, ignore_errors=True)
        final.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(final)
        (self.cache / name / "CURRENT").write_text(digest + "\n")
        self.audit("executor-cached", executor=name, digest=digest)
        return {"name": name, "digest": digest, "cached": "now"}

    def _verified(self, folder: Path, name: str, digest: str) -> LoadedExecutor:
        v = verify_executor(folder, self.verify_key)
        if not v.ok:
            bad = v.failure
            raise RemoteRefused(
                "executor-tampered",
                f"{name}: {bad.file}: {bad.check} failed{': ' + bad.detail if bad.detail else ''}; "
                "the device does not run it: push the executor again from the server",
            )
        if v.digest != digest or v.manifest is None or v.manifest.name != name:
            raise RemoteRefused("executor-tampered", f"{name}: the folder is not the executor the server named ({digest[:19]}); push it again")
        assert v.schemas is not None
        return LoadedExecutor(name=name, version=v.manifest.version, origin=v.manifest.origin, dir=folder, manifest=v.manifest,
                              input_schema=v.schemas.input, output_schema=v.schemas.output,
                              profile=v.manifest.sandbox_profile(), digest=v.digest, file_digests=dict(v.file_digests))

    def call(self, call: dict[str, Any]) -> dict[str, Any]:
        """Run one call of a cached executor in this device's sandbox; answer the outcome and the "after" record."""
        name, digest, trace_id = str(call.get("executor", "")), str(call.get("digest", "")), str(call["trace_id"])
        arguments = call.get("arguments") or {}
        try:
            cached = self.current_digest(name)
            check_drift(name, digest, cached)
            executor = self._verified(self.cache / name / digest.replace(":", "-"), name, digest)
        except RemoteRefused as refusal:
            self.audit("call-refused", trace_id=trace_id, executor=name, **refusal.as_record())
            raise
        profile = executor.profile
        if executor.manifest.capabilities.fs_write_arguments:
            # As on the server: what the call may change is exactly what undo keeps a before-image of.
            profile = writes_narrowed_to_arguments(profile, arguments, executor.input_schema, workspace=self.workspace, env=self.env)
        ctx = build_ctx(now=datetime.now(timezone.utc).isoformat(), workspace=self.workspace, profile=profile,
                        name=executor.name, version=executor.version, env=self.env)
        before = self.capture.before(executor, arguments)
        outcome = invoke(executor.dir, profile, arguments, executor.input_schema, executor.output_schema,
                         workspace=self.workspace, ctx=ctx, env=self.env)
        after = self.capture.after(before)
        self.before_dir.mkdir(parents=True, exist_ok=True)
        (self.before_dir / f"{_safe(trace_id)}.json").write_text(json.dumps({"before": before, "after": after}))
        record = {"trace_id": trace_id, "idempotency_id": call["idempotency_id"], "executor": name, "digest": digest,
                  "ok": outcome.ok, "kind": outcome.kind, "output": outcome.output, "error": outcome.error,
                  "sandbox": outcome.sandbox_mode, "layers": list(outcome.layers), "before": _described(before), "after": after}
        self.audit("call", **record)
        return record

    def undo(self, body: dict[str, Any]) -> dict[str, Any]:
        """Put the paths one call changed back as they were before it."""
        trace_id = str(body.get("trace_id", ""))
        kept_images = self.before_dir / f"{_safe(trace_id)}.json"
        images = json.loads(kept_images.read_text()) if kept_images.is_file() else None
        if images is None:
            raise RemoteRefused("undo-unknown", f"this device holds no before-image for trace {trace_id}; it cannot undo that call")
        # Kept as {"before", "after"}; a bare list is the before-images alone, as kept before the check.
        before, left = (images["before"], images["after"]) if isinstance(images, dict) else (images, None)
        changed = _changed_since(before, left)
        if changed and not body.get("force"):
            self.audit("undo-refused", trace_id=trace_id, kind="undo-conflict", paths=changed)
            raise RemoteRefused("undo-conflict", f"{', '.join(changed)} changed on this device since the call; nothing was put back: "
                                                 "look at them, then undo with --force to put them back anyway")
        restored, kept = [], []
        for record in before:
            if "refused" in record:
                kept.append({"path": record["path"], "reason": record["refused"]})
                continue
            created = record.get("created_from")
            put_back(Path(record["path"]), record["node"], self.blobs, staging=self.workspace.runtime_dir / "put-back",
                     created_from=Path(created) if created else None)
            restored.append(record["path"])
        kept_images.unlink()
        self.audit("undo", trace_id=trace_id, restored=restored, not_restored=kept)
        return {"trace_id": trace_id, "restored": restored, "not_restored": kept}

    @property
    def revoked_marker(self) -> Path:
        return self.files.revoked

    def revoked(self, body: dict[str, Any]) -> dict[str, Any]:
        """The server revoked this device: refuse its calls from now on, and after a restart."""
        if str(body.get("fingerprint", "")) != self.pairing["fingerprint"]:
            raise RemoteRefused("revocation-malformed", "the revocation names another device's certificate; nothing changed here")
        self.revoked_marker.write_text(json.dumps({"fingerprint": self.pairing["fingerprint"],
                                                   "at": datetime.now(timezone.utc).isoformat()}) + "\n")
        if self._listener is not None:
            self._listener.revoked.add(self.pairing["caller_fingerprint"])
        self.audit("revoked", fingerprint=self.pairing["fingerprint"])
        return {"revoked": True}

    def server(self, host: str = "127.0.0.1", port: int = 0) -> CallServer:
        """The mutual-TLS listener: the instance CA's certificates only, and of those the paired server's alone."""
        context: ssl.SSLContext = server_context(self.files.ca_pem, self.files.device_pem, self.files.device_key)
        listener = CallServer(context, self.call, host, port,
                              routes={"/executor": self.receive, "/undo": self.undo, "/revoked": self.revoked},
                              callers={self.pairing["caller_fingerprint"]},
                              on_refused=lambda refusal: self.audit("refused", **refusal),
                              records_file=self.workspace.data_dir / "device" / "idempotency.jsonl")
        if self.revoked_marker.is_file():
            # Revoked by the server: its certificate is refused before any handler, as a revoked client's is.
            listener.revoked.add(self.pairing["caller_fingerprint"])
        self._listener = listener
        return listener


def _described(before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The before-images as the server's log keeps them: each path and its state, the bytes staying here."""
    return [{"path": r["path"], **({"refused": r["refused"]} if "refused" in r else {"node": r["node"]})} for r in before]


def _changed_since(before: list[dict[str, Any]], after: list[dict[str, Any]] | None) -> list[str]:
    """The paths that are neither as the call left them nor as they were before it."""
    if after is None:
        return []
    left = {r["path"]: r.get("node") for r in after}
    changed = []
    for record in before:
        if "refused" in record or record["path"] not in left:
            continue
        try:
            now = take(Path(record["path"]))
        except Exception:  # noqa: BLE001 - unreadable now: not as the call left it
            changed.append(record["path"])
            continue
        if not same(now, left[record["path"]]) and not same(now, record["node"]):
            changed.append(record["path"])
    return changed


def _inside(relative: str) -> PurePosixPath:
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise RemoteRefused("executor-malformed", f"pushed file {relative!r} is not inside the executor's folder; push it again")
    return path


def _safe(trace_id: str) -> str:
    if not trace_id or not all(c.isalnum() or c in "-_" for c in trace_id):
        raise RemoteRefused("call-malformed", f"trace id {trace_id!r} is not letters, digits and dashes; the caller must send one")
    return trace_id
