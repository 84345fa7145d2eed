"""Groups: matrix Lie groups (``lie``), finite groups (``finite``), real representations
(``reps``) and G-sets (``gsets``). Import the submodule you need; this package imports nothing
heavy at import time."""
