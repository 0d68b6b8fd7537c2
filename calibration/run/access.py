"""Who may trigger a calibration run from the app: one access token configured on the server, compared in
constant time, with wrong tokens rate-limited per client address across sessions.

Three wrong tokens are free (typos); then each wrong token locks the client out for LOCKOUT_S, doubling with
every further one up to LOCKOUT_MAX_S: ~10 guesses an hour instead of thousands a second. While locked out,
even the right token is refused (a lockout that a correct guess lifted would tell the guesser it was right).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from dataclasses import dataclass

FREE_TOKEN_TRIES = 3
LOCKOUT_S = 30.0
LOCKOUT_MAX_S = 900.0


@dataclass(frozen=True)
class TokenVerdict:
    allowed: bool
    wait_s: float = 0.0  # > 0: the client is locked out for this long; nothing was compared
    failed_digest: str | None = None  # SHA-256 of a wrong token: the caller keeps it so a rerun counts once


class TokenGate:
    """Wrong-token counts per client address, shared by every session of one server process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: dict[str, int] = {}
        self._locked_until: dict[str, float] = {}

    def wait_s(self, client: str, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        with self._lock:
            return max(0.0, self._locked_until.get(client, 0.0) - now)

    def failure(self, client: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            n = self._failures.get(client, 0) + 1
            self._failures[client] = n
            if n >= FREE_TOKEN_TRIES:
                self._locked_until[client] = now + min(LOCKOUT_MAX_S, LOCKOUT_S * 2 ** (n - FREE_TOKEN_TRIES))

    def success(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)
            self._locked_until.pop(client, None)

    def check(self, *, client: str, given: str, configured: str, last_failed_digest: str | None = None,
              now: float | None = None) -> TokenVerdict:
        """Compare `given` with the `configured` token for `client`. A wrong token counts as one failure,
        except when it is the one this session already failed with (`last_failed_digest`: the same entry seen
        again on a rerun of the page)."""
        wait = self.wait_s(client, now)
        if wait > 0:
            return TokenVerdict(allowed=False, wait_s=wait)
        if hmac.compare_digest(given.encode(), configured.encode()):
            self.success(client)
            return TokenVerdict(allowed=True)
        digest = hashlib.sha256(given.encode()).hexdigest()
        if digest != last_failed_digest:
            self.failure(client, now)
        return TokenVerdict(allowed=False, failed_digest=digest)
