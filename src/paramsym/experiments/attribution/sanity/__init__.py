"""[Attribution] §2.2 lifting sanity check: :mod:`.run` (the known-answer diagnostic and its preset run) and :mod:`.claims` (its two claims)."""
