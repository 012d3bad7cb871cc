"""The one retry policy: capped exponential backoff with jitter, bounded by attempts and a deadline."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Optional, Tuple, Type, TypeVar

from training_runtime.log import log

T = TypeVar("T")


class NotReady(RuntimeError):
    """Something another node or service provides is not there yet; worth waiting for."""


@dataclass(frozen=True)
class RetryPolicy:
    """Retry until ``attempts`` tries (``None``: no cap, the deadline alone bounds it) or ``deadline_s``."""

    attempts: Optional[int] = 8
    base_s: float = 1.0
    cap_s: float = 30.0
    deadline_s: float = 600.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed ``attempt`` (1-based): full jitter over the capped exponential."""
        return random.uniform(0, min(self.cap_s, self.base_s * (2 ** min(attempt - 1, 60))))  # 2**1024 overflows

    def call(
        self,
        action: Callable[[], T],
        *,
        what: str,
        retry_on: Tuple[Type[BaseException], ...] = (NotReady,),
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> T:
        """Run ``action`` until it returns; retry only the exception types in ``retry_on``."""
        started = clock()
        attempt = 1
        while True:
            try:
                return action()
            except retry_on as error:
                waited = clock() - started
                if (self.attempts is not None and attempt >= self.attempts) or waited >= self.deadline_s:
                    log("retry_gave_up", what=what, attempts=attempt, waited_s=round(waited, 1), error=str(error))
                    raise
                pause = min(self.delay(attempt), max(0.0, self.deadline_s - waited))
                log("retry", what=what, attempt=attempt, sleep_s=round(pause, 2), error=str(error))
                sleep(pause)
                attempt += 1
