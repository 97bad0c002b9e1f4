"""One function per thing a user can do; the runtime wired in one place."""
