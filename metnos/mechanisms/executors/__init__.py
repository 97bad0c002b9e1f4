"""Executors as files: manifest, keys, signing, verification, loading, birth.

The lifecycle as events (quarantine, promotion, ...) lives elsewhere; this
package only says what is on disk and whether it may run.
"""
