"""``[commands]`` in config.toml: which programs run_commands may start (seeds/000, the shell axis).

```toml
[commands]
shell = "listed"                                  # "forbidden", "listed" (the default) or "free"
allow = ["ls", "wc", "du", "df", "grep", "head", "tail", "stat", "file", "date", "git"]
max_output_bytes = 65536                          # of stdout and of stderr, each; the rest is cut and said so
timeout_s = 20                                    # the command is killed after this
```

The three positions of the seeds' shell axis: ``forbidden``, no command runs; ``listed``, only the
programs named in ``allow``, by bare name, found in /usr/bin or /bin, started with their arguments as
a list (no shell reads them) and, inside the sandbox, the only programs the kernel lets the call
execute (Landlock); ``free``, any program, a shell included (``sh -c "..."``): discouraged, and
``metnos ask`` warns at every turn while it is set. The default list reads and measures; it holds
nothing that deletes, and nothing that starts another program of its own accord except git
(whose helpers the sandbox does not let it execute); programs whose work is to start others
are refused in `allow` (`LAUNCHERS`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from metnos.settings.declare import setting

COMMANDS_ALLOW = "$COMMANDS_ALLOW"
ALLOW_SETTING = "[commands] allow"
SHELL_SETTING = "[commands] shell"
DEFAULT_ALLOW = ("ls", "wc", "du", "df", "grep", "head", "tail", "stat", "file", "date", "git")
FREE_WARNING = ("warning: [commands] shell = \"free\": run_commands may start any program, a shell "
                "included, with the grants of its profile; set it to \"listed\" to allow only [commands] allow")
# Programs whose work is to start the program their arguments name. The sandbox lets a listed
# program execute only the listed programs and the dynamic loader every one of them needs; the
# loader, executed directly, runs any program it is given (`find -exec ld-linux.so /usr/bin/x`).
# So these cannot be listed: with one of them the list would mean nothing.
LAUNCHERS = frozenset({
    "find", "xargs", "env", "nice", "nohup", "timeout", "stdbuf", "setsid", "flock", "chroot", "ionice", "taskset",
    "chrt", "strace", "ltrace", "watch", "parallel", "sudo", "su", "doas", "runuser", "busybox", "sh", "bash", "dash",
    "zsh", "ksh", "fish", "csh", "tcsh", "python", "python3", "perl", "ruby", "node", "php", "lua", "tclsh", "rsync",
    "tar", "ssh", "make", "xdg-open", "script", "unshare", "nsenter", "prlimit", "ld.so",
})
# A bare program name: what `PATH` lookup finds, never a path a model could point elsewhere.
_PROGRAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


class CommandsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    shell: Literal["forbidden", "listed", "free"] = setting(
        "listed", "The shell axis of run_commands: `forbidden` (no command), `listed` (only `allow`'s programs, "
                  "their arguments as a list) or `free` (any program, a shell included; discouraged, warned at every turn).")
    allow: tuple[str, ...] = setting(
        DEFAULT_ALLOW, "The programs run_commands may start when `shell` is `listed`: bare names, found in "
                       "/usr/bin or /bin; the only programs the sandbox lets the call execute. Programs that start "
                       "the program their arguments name (find, xargs, env, shells, interpreters ...) are refused.")
    max_output_bytes: int = setting(65536, "Bytes of stdout, and of stderr, a command's result keeps; the rest "
                                           "is cut and the result says so.", gt=0, le=1048576)
    timeout_s: float = setting(20.0, "Seconds a command may run before it is killed (run_commands' own cap, "
                                     "25 s, is the most).", gt=0, le=25)

    @field_validator("allow", mode="before")
    @classmethod
    def _names(cls, allow: Any) -> Any:
        if not isinstance(allow, (list, tuple)) or not all(isinstance(n, str) for n in allow):
            raise ValueError("must be a list of program names, like [\"ls\", \"du\"]")
        bad = [n for n in allow if not _PROGRAM_NAME.match(n)]
        if bad:
            raise ValueError(f"{bad} are not bare program names (no '/', no spaces): name the program, "
                             "like \"du\", and it is found in /usr/bin or /bin")
        return tuple(dict.fromkeys(allow))

    @model_validator(mode="after")
    def _no_launchers(self) -> CommandsConfig:
        if self.shell == "free":
            return self
        launchers = [n for n in self.allow if n in LAUNCHERS or n.startswith(("python", "ld-linux"))]
        if launchers:
            msg = (f"allow: {launchers} start the programs their arguments name (and through the dynamic loader any "
                   "program, listed or not), so they cannot be listed; leave them out, or set [commands] shell = "
                   "\"free\" to allow every program (discouraged)")
            raise ValueError(msg)
        return self

    def executor_config(self) -> dict[str, Any]:
        """What run_commands reads from ctx.config (metnos/mechanisms/executors/context.py)."""
        return {"commands": {"shell": self.shell, "allow": list(self.allow),
                             "max_output_bytes": self.max_output_bytes, "timeout_s": self.timeout_s}}
